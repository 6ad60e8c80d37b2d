package mover

import (
	"path"
	"strings"
	"testing"
)

// TestTempNameIsUniquePerFile: the case — names sharing a prefix longer than
// the part a temporary name keeps — and names at NAME_MAX.
func TestTempNameIsUniquePerFile(t *testing.T) {
	long := strings.Repeat("x", 181)
	cases := [][2]string{
		{"d/" + long + "A", "d/" + long + "B"},
		{strings.Repeat("a", 255), strings.Repeat("a", 254) + "b"},
		{"bad\xfe_big.bin", "bad\xff_big.bin"},
		{"Case.bin", "case.bin"},
	}
	for _, c := range cases {
		a, b := TempName(c[0], "job"), TempName(c[1], "job")
		if a == b {
			t.Errorf("%q and %q share the temporary name %q", c[0], c[1], a)
		}
		for _, tmp := range []string{a, b} {
			if n := len(path.Base(tmp)); n > 255 {
				t.Errorf("temporary name of %d bytes: %q", n, tmp)
			}
		}
	}
	if TempName("f", "job-a") == TempName("f", "job-b") {
		t.Error("two jobs share a temporary name")
	}
	if TempName("dir/f", "j") != TempName("dir/f", "j") {
		t.Error("a temporary name is not fixed for a job (a restarted receiver must find it again)")
	}
}

// FuzzTempName: any two different names of one directory get different temporary
// names, in the same directory, within NAME_MAX, recognised as ours.
func FuzzTempName(f *testing.F) {
	f.Add("a", "b", "job")
	f.Add(strings.Repeat("p", 200)+"1", strings.Repeat("p", 200)+"2", "j")
	f.Fuzz(func(t *testing.T, a, b, job string) {
		if a == "" || b == "" || strings.ContainsAny(a+b, "/\x00") || len(a) > 255 || len(b) > 255 {
			return
		}
		ta, tb := TempName("dir/"+a, job), TempName("dir/"+b, job)
		if a != b && ta == tb {
			t.Fatalf("%q and %q share %q", a, b, ta)
		}
		if path.Dir(ta) != "dir" || len(path.Base(ta)) > 255 || !IsTempName(path.Base(ta)) {
			t.Fatalf("temporary name %q of %q", ta, a)
		}
	})
}
