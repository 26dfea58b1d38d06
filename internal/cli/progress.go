package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/trainstep/trainstep/core/message"
	"github.com/trainstep/trainstep/core/trainjob"
)

// progressEvery is how often, off a terminal, a change of progress alone prints a line.
const progressEvery = 10 * time.Second

// barWidth is the number of cells of the progress bar.
const barWidth = 20

// progressView shows a running step. On a terminal it keeps one status line at the bottom,
// redrawn in place (a bar, percent, time left, the latest metrics, nodes running), and the log
// lines streamed above it: every write to the terminal goes through it, so a log line never
// lands in the middle of the status line. Elsewhere (a file, a pipe, an engine's log) it prints a
// line on each change of state at once and a change of progress alone at most every
// progressEvery, the latest one winning.
type progressView struct {
	mu     sync.Mutex
	status io.Writer // where status lines go (stderr)
	tty    bool
	width  int
	every  time.Duration

	shown   string // the status line on screen (tty) or last printed (not tty)
	shownAt time.Time
	state   string // the last message without its progress line
	pending string // a line held back by the throttle (not tty)
	timer   *time.Timer
	partial []byte // a log line not yet ended (tty)
}

// newProgressView shows progress on status; a terminal when status is one.
func newProgressView(status io.Writer) *progressView {
	v := &progressView{status: status, every: progressEvery, width: 100}
	if f, ok := status.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		v.tty = true
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 10 {
			v.width = w
		}
	}
	return v
}

// say prints a line of its own, above the status line on a terminal.
func (v *progressView) say(line string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clear()
	fmt.Fprintln(v.status, line)
	v.redraw()
}

// update shows obs: a new state as a line, progress on the status line (tty) or throttled.
func (v *progressView) update(obs trainjob.Observation) {
	v.mu.Lock()
	defer v.mu.Unlock()
	msg := message.FirstLine(obs.Message)
	state := trainjob.WithoutProgress(msg)
	line := fmt.Sprintf("trainstep: %s: %s", obs.Phase, msg)
	if v.tty {
		if state != v.state {
			v.clear()
			fmt.Fprintf(v.status, "trainstep: %s: %s\n", obs.Phase, state)
			v.state = state
		}
		v.shown = statusLine(obs, v.width)
		v.redraw()
		return
	}
	if line == v.shown {
		return
	}
	now := time.Now()
	if state != v.state || !strings.Contains(v.shown, " · ") || now.Sub(v.shownAt) >= v.every {
		v.printLocked(line, state, now)
		return
	}
	v.pending = line
	if v.timer == nil {
		v.timer = time.AfterFunc(v.every-now.Sub(v.shownAt), v.flush)
	}
	v.state = state
}

func (v *progressView) printLocked(line, state string, now time.Time) {
	fmt.Fprintln(v.status, line)
	v.shown, v.shownAt, v.state, v.pending = line, now, state, ""
	if v.timer != nil {
		v.timer.Stop()
		v.timer = nil
	}
}

// flush prints the line the throttle held back.
func (v *progressView) flush() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.timer = nil
	if v.pending != "" {
		v.printLocked(v.pending, v.state, time.Now())
	}
}

// done ends the view: the held line is printed, the status line is left on screen.
func (v *progressView) done() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.timer != nil {
		v.timer.Stop()
		v.timer = nil
	}
	if v.pending != "" {
		v.printLocked(v.pending, v.state, time.Now())
	}
	if v.tty {
		if len(v.partial) > 0 {
			v.clear()
			fmt.Fprintf(v.status, "%s\n", v.partial)
			v.partial = nil
			v.redraw()
		}
		if v.shown != "" {
			fmt.Fprintln(v.status)
		}
		v.shown = ""
	}
}

// clear erases the status line (tty).
func (v *progressView) clear() {
	if v.tty && v.shown != "" {
		fmt.Fprint(v.status, "\r\x1b[K")
	}
}

// redraw writes the status line again (tty).
func (v *progressView) redraw() {
	if v.tty && v.shown != "" {
		fmt.Fprint(v.status, "\r\x1b[K"+v.shown)
	}
}

// logs is where streamed log lines go: on a terminal through the view, whole lines only, above
// the status line; elsewhere straight to out.
func (v *progressView) logs(out io.Writer) io.Writer {
	if !v.tty || out != v.status && !sameTerminal(out, v.status) {
		return out
	}
	return logWriter{v: v, out: out}
}

// sameTerminal reports whether a and b are both terminals (the status line shares the screen
// with the logs, whichever descriptor each goes through).
func sameTerminal(a, b io.Writer) bool {
	fa, ok1 := a.(*os.File)
	fb, ok2 := b.(*os.File)
	return ok1 && ok2 && term.IsTerminal(int(fa.Fd())) && term.IsTerminal(int(fb.Fd()))
}

type logWriter struct {
	v   *progressView
	out io.Writer
}

func (w logWriter) Write(p []byte) (int, error) {
	v := w.v
	v.mu.Lock()
	defer v.mu.Unlock()
	v.partial = append(v.partial, p...)
	i := bytes.LastIndexByte(v.partial, '\n')
	if i < 0 {
		return len(p), nil
	}
	v.clear()
	_, err := w.out.Write(v.partial[:i+1])
	v.partial = append(v.partial[:0], v.partial[i+1:]...)
	v.redraw()
	return len(p), err
}

// statusLine is the terminal's one line for a running step, at most width cells:
// "[████████░░░░░░░░░░░░]  42% · 12m left · loss=0.31 acc=0.88 · 2/2 nodes running".
func statusLine(obs trainjob.Observation, width int) string {
	var b strings.Builder
	if p := obs.Progress; p != nil {
		filled := int(min(max(*p, 0), 100)) * barWidth / 100
		fmt.Fprintf(&b, "[%s%s] ", strings.Repeat("█", filled), strings.Repeat("░", barWidth-filled))
	}
	if line := obs.ProgressLine(); line != "" {
		b.WriteString(line + " · ")
	} else {
		b.WriteString(string(obs.Phase) + " · ")
	}
	fmt.Fprintf(&b, "%d/%d nodes running", obs.RunningNodes, obs.NumNodes)
	r := []rune(b.String())
	if len(r) > width-1 {
		r = append(r[:width-2], '…')
	}
	return string(r)
}
