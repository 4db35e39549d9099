package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress is the live line a long operation (a scan of the table, a
// redrive) keeps on stderr while it runs: only when stderr is a terminal,
// rewritten in place at most every progressEvery, and erased before
// anything else is printed. Where stderr is a file or a pipe it prints
// nothing; the command's totals, one line at the end, go there either way.
type progress struct {
	w    io.Writer
	live bool

	mu    sync.Mutex
	shown bool
	last  time.Time
}

const progressEvery = 200 * time.Millisecond

func newProgress(w io.Writer, terminal bool) *progress {
	return &progress{w: w, live: terminal}
}

// show replaces the line with "sendonce: " and line.
func (p *progress) show(line string) {
	if !p.live {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= progressEvery {
		p.last = now
		p.shown = true
		fmt.Fprintf(p.w, "\r\033[Ksendonce: %s", line)
	}
}

// clear erases the line, if one is shown.
func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
		p.last = time.Time{}
	}
}

// note prints one line on stderr, after erasing the progress line.
func (a *app) note(format string, args ...any) {
	a.prog.clear()
	fmt.Fprintf(a.stderr, "sendonce: "+format+"\n", args...)
}
