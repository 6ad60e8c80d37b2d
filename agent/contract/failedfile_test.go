package contract

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCut: a string longer than the bound is cut to exactly the bound, or as many bytes
// fewer as keep its last rune whole, and marked; a string that fits is kept as is.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven byte", 10, "eleven ..."},
		{"ab日本語", 8, "ab日..."},                                         // 2 + 3 + the mark's 3
		{"ab日本語", 7, "ab..."},                                          // 日 would end at byte 5, and the mark needs 3 more
		{strings.Repeat("é", 10), 10, "ééé..."},                        // 2 bytes each: 3 whole, then the mark
		{`"a\xfe\x80b"` + strings.Repeat("x", 20), 12, `"a\xfe\x8...`}, // quoted escapes are plain ASCII
	} {
		got := Cut(tc.s, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q (%d bytes), want %q", tc.s, tc.n, got, len(got), tc.want)
		}
	}
	f := FailedFile{Path: strings.Repeat("p/", 1000), Error: strings.Repeat("e", 1000)}.Bounded()
	if len(f.Path) != MaxFailedPath || len(f.Error) != MaxFailedError {
		t.Errorf("bounded to %d/%d bytes, want %d/%d", len(f.Path), len(f.Error), MaxFailedPath, MaxFailedError)
	}
}
