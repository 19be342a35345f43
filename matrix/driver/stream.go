package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Stream connects the orchestrator to a driver program that is not a child
// process of this one, such as a driver in a container
// (matrix/driver/container). The program speaks the same line-delimited
// JSON protocol as a ProcessSpec's.
type Stream struct {
	// Client is the client id the driver must report in hello.
	Client string
	// Stdin carries commands; closing it is the end of input, after which
	// the program exits.
	Stdin io.WriteCloser
	// Stdout carries answers; it ends when the program exits.
	Stdout io.Reader
	// Log returns the tail of the program's log (its stderr), for error
	// messages.
	Log fmt.Stringer
	// Exited is closed once the program has ended.
	Exited <-chan struct{}
	// Kill ends the program at once; Exited is closed soon after.
	Kill func() error
	// Release, if set, runs once in Close after the program ended, for
	// example to remove its container.
	Release func() error
}

// StartStream sends hello with bootstrap over s and returns the Driver
// that speaks to the program. When hello fails the program is closed (and
// released) before the error is returned.
func StartStream(ctx context.Context, s Stream, bootstrap string) (Driver, error) {
	if s.Stdin == nil || s.Stdout == nil || s.Exited == nil || s.Kill == nil {
		return nil, errors.New("driver: stream lacks stdin, stdout, exited or kill")
	}
	log := s.Log
	if log == nil {
		log = &tailBuffer{}
	}
	p := &process{
		spec:    ProcessSpec{Client: s.Client},
		kill:    s.Kill,
		stdin:   s.Stdin,
		stderr:  log,
		exited:  s.Exited,
		release: s.Release,
	}
	return p.hello(ctx, s.Stdout, bootstrap)
}
