package message

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFirstLine(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"empty":           {"", ""},
		"one line":        {"Failed", "Failed"},
		"cut at newline":  {"job failed\nlast lines of pod:\nTraceback", "job failed"},
		"leading blank":   {"\n  \nfirst real line\nsecond", "first real line"},
		"trailing spaces": {"  padded  \n", "padded"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, FirstLine(tc.in))
		})
	}
}
