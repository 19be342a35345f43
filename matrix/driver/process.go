package driver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// ProcessSpec describes an out-of-process driver: a program speaking the
// line-delimited JSON protocol on stdin and stdout.
type ProcessSpec struct {
	// Client is the client id the driver must report in hello.
	Client string
	// Argv is the program and its arguments.
	Argv []string
	// Env is added to this process's environment.
	Env []string
	// Dir is the working directory; empty means the current one.
	Dir string
}

// ProcessOpener returns an Opener that starts spec's program once per
// Open; the process lives until Close, so an interpreter or JVM starts once
// per matrix run, not once per command.
func ProcessOpener(spec ProcessSpec) Opener {
	return func(ctx context.Context, bootstrap string) (Driver, error) {
		return StartProcess(ctx, spec, bootstrap)
	}
}

// process is a Driver backed by a child process, or by any other program
// reached through a Stream (a container).
type process struct {
	spec   ProcessSpec
	kill   func() error // Ends the program at once.
	stdin  io.WriteCloser
	out    *bufio.Scanner
	stderr fmt.Stringer // The tail of the program's log.
	info   Info
	exited <-chan struct{}
	// release runs once in Close after the program ended (or nil).
	release func() error

	mu     sync.Mutex // Serialises commands: one in flight at a time.
	nextID int64
	broken error // Set once the stream is out of step; every later call fails.
}

// StartProcess starts spec's program and sends hello with bootstrap.
func StartProcess(ctx context.Context, spec ProcessSpec, bootstrap string) (Driver, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("driver: empty process command")
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("driver %s: %w", spec.Client, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("driver %s: %w", spec.Client, err)
	}
	tail := &tailBuffer{max: 16 << 10}
	cmd.Stderr = tail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("driver %s: start %v: %w", spec.Client, spec.Argv, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // The exit is reported through broken calls and Close.
		close(exited)
	}()
	p := &process{spec: spec, kill: cmd.Process.Kill, stdin: stdin, stderr: tail, exited: exited}
	return p.hello(ctx, stdout, bootstrap)
}

// hello starts reading the program's answers from stdout and sends hello.
func (p *process) hello(ctx context.Context, stdout io.Reader, bootstrap string) (Driver, error) {
	spec := p.spec
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(make([]byte, 64<<10), MaxLine)

	var hr HelloResult
	h := Hello{Bootstrap: bootstrap, Protocol: ProtocolVersion}
	if sec := SecurityFrom(ctx); sec.Protocol != "" {
		h.Security = &sec
	}
	if err := p.call(ctx, OpHello, h, &hr); err != nil {
		p.Close()
		return nil, err
	}
	if hr.Protocol != ProtocolVersion {
		p.Close()
		return nil, fmt.Errorf("driver %s speaks protocol %d, want %d", spec.Client, hr.Protocol, ProtocolVersion)
	}
	if hr.Client != spec.Client {
		p.Close()
		return nil, fmt.Errorf("driver started as %s reports client %q", spec.Client, hr.Client)
	}
	p.info = hr.Info
	return p, nil
}

// call sends one command and decodes its result into out. If ctx ends
// before the answer, the process is killed: the stream can no longer be
// trusted to pair answers with commands.
func (p *process) call(ctx context.Context, op string, args, out any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != nil {
		return p.broken
	}
	p.nextID++
	id := p.nextID
	raw, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("driver %s: encode %s: %w", p.spec.Client, op, err)
	}
	line, err := json.Marshal(Command{ID: id, Op: op, Args: raw})
	if err != nil {
		return fmt.Errorf("driver %s: encode %s: %w", p.spec.Client, op, err)
	}
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		return p.fail(fmt.Errorf("driver %s: write %s: %w", p.spec.Client, op, err))
	}
	type readResult struct {
		resp Response
		err  error
	}
	done := make(chan readResult, 1)
	go func() {
		if !p.out.Scan() {
			err := p.out.Err()
			if err == nil {
				err = io.EOF
			}
			done <- readResult{err: err}
			return
		}
		var r Response
		err := json.Unmarshal(p.out.Bytes(), &r)
		done <- readResult{resp: r, err: err}
	}()
	select {
	case <-ctx.Done():
		_ = p.kill() // Unblocks the reader; the process is now broken.
		<-done
		return p.fail(fmt.Errorf("driver %s: %s: %w", p.spec.Client, op, ctx.Err()))
	case rr := <-done:
		if rr.err != nil {
			return p.fail(fmt.Errorf("driver %s: read %s answer: %w; stderr: %s", p.spec.Client, op, rr.err, p.stderr.String()))
		}
		if rr.resp.ID != id {
			return p.fail(fmt.Errorf("driver %s: answer id %d for command %d", p.spec.Client, rr.resp.ID, id))
		}
		if !rr.resp.OK {
			return responseError(op, rr.resp.Error)
		}
		if out != nil && len(rr.resp.Result) > 0 {
			if err := json.Unmarshal(rr.resp.Result, out); err != nil {
				return fmt.Errorf("driver %s: decode %s result: %w", p.spec.Client, op, err)
			}
		}
		return nil
	}
}

// fail marks the process broken; callers hold p.mu.
func (p *process) fail(err error) error {
	p.broken = err
	return err
}

func (p *process) Client() string { return p.spec.Client }
func (p *process) Info() Info     { return p.info }

func (p *process) CreateTopic(ctx context.Context, req CreateTopic) error {
	return p.call(ctx, OpCreateTopic, req, nil)
}

func (p *process) DeleteTopic(ctx context.Context, topic string) error {
	return p.call(ctx, OpDeleteTopic, TopicArgs{Topic: topic}, nil)
}

func (p *process) DescribeTopic(ctx context.Context, topic string) (TopicInfo, error) {
	var ti TopicInfo
	err := p.call(ctx, OpDescribeTopic, TopicArgs{Topic: topic}, &ti)
	return ti, err
}

func (p *process) CreatePartitions(ctx context.Context, topic string, total int32) error {
	return p.call(ctx, OpCreatePartitions, CreatePartitionsArgs{Topic: topic, Total: total}, nil)
}

func (p *process) DescribeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	var r ConfigsResult
	err := p.call(ctx, OpDescribeConfigs, TopicArgs{Topic: topic}, &r)
	return r.Configs, err
}

func (p *process) AlterConfigs(ctx context.Context, req AlterConfigs) error {
	return p.call(ctx, OpAlterConfigs, req, nil)
}

func (p *process) Produce(ctx context.Context, req Produce) (ProduceResult, error) {
	var r ProduceResult
	err := p.call(ctx, OpProduce, req, &r)
	return r, err
}

func (p *process) Consume(ctx context.Context, req Consume) (ConsumeResult, error) {
	var r ConsumeResult
	err := p.call(ctx, OpConsume, req, &r)
	return r, err
}

func (p *process) ListOffsets(ctx context.Context, req ListOffsets) (ListOffsetsResult, error) {
	var r ListOffsetsResult
	err := p.call(ctx, OpListOffsets, req, &r)
	return r, err
}

func (p *process) DeleteRecords(ctx context.Context, req DeleteRecords) (int64, error) {
	var r DeleteRecordsResult
	err := p.call(ctx, OpDeleteRecords, req, &r)
	return r.LowWatermark, err
}

func (p *process) GroupConsume(ctx context.Context, req GroupConsume) (GroupConsumeResult, error) {
	var r GroupConsumeResult
	err := p.call(ctx, OpGroupConsume, req, &r)
	return r, err
}

func (p *process) FetchCommitted(ctx context.Context, req FetchCommitted) (int64, error) {
	var r OffsetResult
	err := p.call(ctx, OpFetchCommitted, req, &r)
	return r.Offset, err
}

func (p *process) DeleteGroup(ctx context.Context, group string) error {
	return p.call(ctx, OpDeleteGroup, GroupArgs{Group: group}, nil)
}

func (p *process) DescribeGroup(ctx context.Context, group string) (GroupDescription, error) {
	var r GroupDescription
	err := p.call(ctx, OpDescribeGroup, GroupArgs{Group: group}, &r)
	return r, err
}

func (p *process) ListGroups(ctx context.Context) ([]string, error) {
	var r ListGroupsResult
	err := p.call(ctx, OpListGroups, struct{}{}, &r)
	return r.Groups, err
}

func (p *process) Transform(ctx context.Context, req Transform) (TransformResult, error) {
	var r TransformResult
	err := p.call(ctx, OpTransform, req, &r)
	return r, err
}

func (p *process) ProducerOpen(ctx context.Context, req ProducerOpen) error {
	return p.call(ctx, OpProducerOpen, req, nil)
}

func (p *process) ProducerSend(ctx context.Context, req ProducerSend) (ProduceResult, error) {
	var r ProduceResult
	err := p.call(ctx, OpProducerSend, req, &r)
	return r, err
}

func (p *process) ProducerClose(ctx context.Context, producer string) error {
	return p.call(ctx, OpProducerClose, ProducerArgs{Producer: producer}, nil)
}

// errKilled marks a process ended by Kill.
var errKilled = errors.New("driver: killed")

// Kill ends the program at once (SIGKILL for a local process), as a
// crash: the client library closes nothing and leaves no group; the
// kernel closes its sockets. Every later command fails; Close only
// releases what is left.
func (p *process) Kill() error {
	p.mu.Lock()
	if p.broken == nil {
		p.broken = fmt.Errorf("driver %s: %w", p.spec.Client, errKilled)
	}
	p.mu.Unlock()
	err := p.kill()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("driver %s: still running 10s after kill", p.spec.Client)
	}
	if err != nil {
		return fmt.Errorf("driver %s: kill: %w", p.spec.Client, err)
	}
	return nil
}

// Close sends close, closes stdin and waits up to 10 seconds for the
// process to exit before killing it.
func (p *process) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.call(ctx, OpClose, struct{}{}, nil)
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.kill() // Wait in the reaper goroutine reports it.
		<-p.exited
		return errors.Join(fmt.Errorf("driver %s did not exit after close and was killed", p.spec.Client), p.releaseOnce())
	}
	if err != nil && !errors.Is(err, p.brokenErr()) {
		return errors.Join(err, p.releaseOnce())
	}
	return p.releaseOnce()
}

// releaseOnce runs release, if any, once.
func (p *process) releaseOnce() error {
	p.mu.Lock()
	r := p.release
	p.release = nil
	p.mu.Unlock()
	if r == nil {
		return nil
	}
	return r()
}

func (p *process) brokenErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken
}

// tailBuffer keeps the last max bytes written to it (a child's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
