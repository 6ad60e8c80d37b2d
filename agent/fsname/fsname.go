// Package fsname carries file names as the bytes the file system stores. On Linux a
// name is any bytes but '/' and NUL; JSON strings are UTF-8, and encoding/json turns
// every invalid byte into U+FFFD, so two names that differ only in invalid bytes would
// arrive as one. Path marshals as a plain JSON string when the name is valid UTF-8 (the
// common case stays readable in journals and logs) and as {"b64": "..."} otherwise, and
// unmarshals both, byte for byte.
package fsname

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Path is a file name or a slash-separated path, byte-exact through JSON.
type Path string

type rawForm struct {
	B64 []byte `json:"b64"`
}

// MarshalJSON implements json.Marshaler.
func (p Path) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(p)) {
		return json.Marshal(string(p))
	}
	return json.Marshal(rawForm{B64: []byte(p)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *Path) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var r rawForm
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("fsname: %w", err)
		}
		*p = Path(r.B64)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("fsname: %w", err)
	}
	*p = Path(s)
	return nil
}

// Show is a path as messages print it: unchanged when it is printable UTF-8, else Go's
// quoted form (invalid bytes as \xfe, a newline as \n), so that an error message or a
// status field names the exact bytes and two different names never read the same.
func Show(p string) string {
	if utf8.ValidString(p) {
		printable := true
		for _, r := range p {
			if !unicode.IsPrint(r) {
				printable = false
				break
			}
		}
		if printable && p != "" {
			return p
		}
	}
	return strconv.Quote(p)
}

// Printable escapes what a message cannot carry as it is: invalid UTF-8 bytes become
// \xNN and control characters their Go escapes, so that a message holding a name is
// valid UTF-8 on one line (a Kubernetes status, a log line) and shows the bytes.
func Printable(msg string) string {
	if utf8.ValidString(msg) && !strings.ContainsFunc(msg, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		r, n := utf8.DecodeRuneInString(msg[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, msg[i])
		case unicode.IsPrint(r) || r == ' ':
			b.WriteString(msg[i : i+n])
		default:
			q := strconv.QuoteRune(r) // 'x' with the escape inside
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// Message is err's text for a peer or a status: the paths the os package put in it
// (fs.PathError, os.LinkError) shown by Show, the rest made Printable.
func Message(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = strings.Replace(msg, pe.Error(), pe.Op+" "+Show(pe.Path)+": "+pe.Err.Error(), 1)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		msg = strings.Replace(msg, le.Error(), le.Op+" "+Show(le.Old)+" "+Show(le.New)+": "+le.Err.Error(), 1)
	}
	return Printable(msg)
}
