// Package message shapes the text trainstep shows people: the one line a status line or log
// line has room for.
package message

import "strings"

// FirstLine is the first non-blank-trimmed line of a multi-line message: the Trainer's reason
// text, a Python traceback's summary or a validation error, cut where a one-line view ends.
func FirstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
