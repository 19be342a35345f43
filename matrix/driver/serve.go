package driver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Serve is the driver side of the protocol: it reads commands from r,
// runs them on the driver that open returns for the hello command, and
// writes responses to w, until close, end of input or ctx ends. It is the
// reference implementation for drivers in other languages and lets any Go
// driver run out of process.
func Serve(ctx context.Context, client string, open Opener, r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	enc := json.NewEncoder(w) // Encode ends each value with '\n'.
	var d Driver
	defer func() {
		if d != nil {
			d.Close()
		}
	}()
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		var cmd Command
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			return fmt.Errorf("driver: bad command line: %w", err)
		}
		if cmd.Op == OpClose {
			return enc.Encode(Response{ID: cmd.ID, OK: true})
		}
		var (
			result any
			err    error
		)
		if cmd.Op == OpHello {
			result, d, err = hello(ctx, client, open, d, cmd.Args)
		} else if d == nil {
			err = fmt.Errorf("driver: %s before hello", cmd.Op)
		} else {
			result, err = dispatch(ctx, d, cmd)
		}
		resp := Response{ID: cmd.ID, OK: err == nil}
		if err != nil {
			resp.Error = errorResponse(err)
		} else if resp.Result, err = json.Marshal(result); err != nil {
			return fmt.Errorf("driver: encode %s result: %w", cmd.Op, err)
		}
		if err := enc.Encode(resp); err != nil {
			return fmt.Errorf("driver: write response: %w", err)
		}
	}
	return sc.Err()
}

func hello(ctx context.Context, client string, open Opener, cur Driver, raw json.RawMessage) (any, Driver, error) {
	if cur != nil {
		return nil, cur, errors.New("driver: hello sent twice")
	}
	var h Hello
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, nil, fmt.Errorf("driver: hello arguments: %w", err)
	}
	if h.Protocol != ProtocolVersion {
		return nil, nil, fmt.Errorf("driver: protocol %d requested, this driver speaks %d", h.Protocol, ProtocolVersion)
	}
	d, err := open(ctx, h.Bootstrap)
	if err != nil {
		return nil, nil, err
	}
	return HelloResult{Client: client, Protocol: ProtocolVersion, Info: d.Info()}, d, nil
}

// decode unmarshals a command's arguments into a new T.
func decode[T any](cmd Command) (T, error) {
	var v T
	if len(cmd.Args) == 0 {
		return v, fmt.Errorf("driver: %s needs arguments", cmd.Op)
	}
	if err := json.Unmarshal(cmd.Args, &v); err != nil {
		return v, fmt.Errorf("driver: %s arguments: %w", cmd.Op, err)
	}
	return v, nil
}

func dispatch(ctx context.Context, d Driver, cmd Command) (any, error) {
	switch cmd.Op {
	case OpCreateTopic:
		a, err := decode[CreateTopic](cmd)
		if err != nil {
			return nil, err
		}
		return struct{}{}, d.CreateTopic(ctx, a)
	case OpDeleteTopic:
		a, err := decode[TopicArgs](cmd)
		if err != nil {
			return nil, err
		}
		return struct{}{}, d.DeleteTopic(ctx, a.Topic)
	case OpDescribeTopic:
		a, err := decode[TopicArgs](cmd)
		if err != nil {
			return nil, err
		}
		return d.DescribeTopic(ctx, a.Topic)
	case OpCreatePartitions:
		a, err := decode[CreatePartitionsArgs](cmd)
		if err != nil {
			return nil, err
		}
		return struct{}{}, d.CreatePartitions(ctx, a.Topic, a.Total)
	case OpDescribeConfigs:
		a, err := decode[TopicArgs](cmd)
		if err != nil {
			return nil, err
		}
		cfg, err := d.DescribeConfigs(ctx, a.Topic)
		return ConfigsResult{Configs: cfg}, err
	case OpAlterConfigs:
		a, err := decode[AlterConfigs](cmd)
		if err != nil {
			return nil, err
		}
		return struct{}{}, d.AlterConfigs(ctx, a)
	case OpProduce:
		a, err := decode[Produce](cmd)
		if err != nil {
			return nil, err
		}
		return d.Produce(ctx, a)
	case OpConsume:
		a, err := decode[Consume](cmd)
		if err != nil {
			return nil, err
		}
		return d.Consume(ctx, a)
	case OpListOffsets:
		a, err := decode[ListOffsets](cmd)
		if err != nil {
			return nil, err
		}
		return d.ListOffsets(ctx, a)
	case OpDeleteRecords:
		a, err := decode[DeleteRecords](cmd)
		if err != nil {
			return nil, err
		}
		low, err := d.DeleteRecords(ctx, a)
		return DeleteRecordsResult{LowWatermark: low}, err
	case OpGroupConsume:
		a, err := decode[GroupConsume](cmd)
		if err != nil {
			return nil, err
		}
		return d.GroupConsume(ctx, a)
	case OpFetchCommitted:
		a, err := decode[FetchCommitted](cmd)
		if err != nil {
			return nil, err
		}
		off, err := d.FetchCommitted(ctx, a)
		return OffsetResult{Offset: off}, err
	case OpDeleteGroup:
		a, err := decode[GroupArgs](cmd)
		if err != nil {
			return nil, err
		}
		return struct{}{}, d.DeleteGroup(ctx, a.Group)
	case OpDescribeGroup:
		a, err := decode[GroupArgs](cmd)
		if err != nil {
			return nil, err
		}
		return d.DescribeGroup(ctx, a.Group)
	case OpListGroups:
		gs, err := d.ListGroups(ctx)
		return ListGroupsResult{Groups: gs}, err
	case OpTransform:
		a, err := decode[Transform](cmd)
		if err != nil {
			return nil, err
		}
		return d.Transform(ctx, a)
	case OpProducerOpen:
		a, err := decode[ProducerOpen](cmd)
		if err != nil {
			return nil, err
		}
		return struct{}{}, d.ProducerOpen(ctx, a)
	case OpProducerSend:
		a, err := decode[ProducerSend](cmd)
		if err != nil {
			return nil, err
		}
		return d.ProducerSend(ctx, a)
	case OpProducerClose:
		a, err := decode[ProducerArgs](cmd)
		if err != nil {
			return nil, err
		}
		return struct{}{}, d.ProducerClose(ctx, a.Producer)
	default:
		return nil, Unsupported("unknown operation %q", cmd.Op)
	}
}
