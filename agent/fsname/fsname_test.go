package fsname

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

func TestPathRoundTripsEveryByte(t *testing.T) {
	for _, name := range []string{
		"plain.txt",
		"bad\xfe_big.bin",
		"bad\xff_big.bin",
		"new\nline",
		"\xef\xbf\xbd", // U+FFFD itself, valid UTF-8: must stay apart from an invalid byte
		"<&>\u2028",
		"",
	} {
		b, err := json.Marshal(struct{ P Path }{Path(name)})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ P Path }
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q: %v (%s)", name, err, b)
		}
		if string(back.P) != name {
			t.Errorf("%q came back as %q through %s", name, back.P, b)
		}
	}
}

func TestShowNamesTheExactBytes(t *testing.T) {
	cases := map[string]string{
		"p/a.dat":        "p/a.dat",
		"bad\xfe_big":    `"bad\xfe_big"`,
		"bad\xff_big":    `"bad\xff_big"`,
		"two\nlines":     `"two\nlines"`,
		"":               `""`,
		"résumé/naïve.h": "résumé/naïve.h",
	}
	for in, want := range cases {
		if got := Show(in); got != want {
			t.Errorf("Show(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestMessageShowsPathsOfOSErrors(t *testing.T) {
	err := fmt.Errorf("creating directory: %w", &fs.PathError{Op: "mkdirat", Path: "h/bad\xfe", Err: syscall.ENAMETOOLONG})
	if got, want := Message(err), `creating directory: mkdirat "h/bad\xfe": file name too long`; got != want {
		t.Errorf("Message = %s, want %s", got, want)
	}
	if got, want := Message(errors.New("raw \xff and\nnewline")), `raw \xff and\nnewline`; got != want {
		t.Errorf("Message = %s, want %s", got, want)
	}
	if got := Message(errors.New("plain: ok")); got != "plain: ok" {
		t.Errorf("a plain message changed: %s", got)
	}
}

// FuzzPath: any bytes survive JSON unchanged, and two different names never marshal
// to the same JSON.
func FuzzPath(f *testing.F) {
	f.Add([]byte("a"), []byte("b"))
	f.Add([]byte("bad\xfe"), []byte("bad\xff"))
	f.Add([]byte("\xef\xbf\xbd"), []byte("\xff"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ja, err := json.Marshal(Path(a))
		if err != nil {
			t.Fatal(err)
		}
		var back Path
		if err := json.Unmarshal(ja, &back); err != nil || string(back) != string(a) {
			t.Fatalf("%q came back as %q (%v) through %s", a, back, err, ja)
		}
		if p := Printable(string(a)); !utf8.ValidString(p) || strings.ContainsAny(p, "\n\r") {
			t.Fatalf("Printable(%q) = %q is not one valid line", a, p)
		}
		jb, _ := json.Marshal(Path(b))
		if string(a) != string(b) && string(ja) == string(jb) {
			t.Fatalf("%q and %q both marshal to %s", a, b, ja)
		}
	})
}
