package wire

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/wire/pb"
)

func TestErrorTableComplete(t *testing.T) {
	values := pb.ServerError(0).Descriptor().Values()
	if len(serverErrors) != values.Len() {
		t.Fatalf("%d table entries for %d codes", len(serverErrors), values.Len())
	}
	for i := range values.Len() {
		code := pb.ServerError(values.Get(i).Number())
		e := ErrorFor(code)
		if e.Code != code || e.Message == "" {
			t.Errorf("ErrorFor(%v) = %+v", code, e)
		}
		if !strings.HasPrefix(e.Error(), "wire: "+code.String()) {
			t.Errorf("%v: message %q", code, e.Error())
		}
	}
	if ErrorFor(pb.ServerError(999)) != ErrUnknown || ErrorFor(pb.ServerError(-1)) != ErrUnknown {
		t.Error("unknown codes do not map to ErrUnknown")
	}
	for _, e := range []*Error{ErrServiceNotReady, ErrTooManyRequests, ErrMetadata, ErrPersistence} {
		if !e.Retriable {
			t.Errorf("%v should be retriable", e.Code)
		}
	}
	for _, e := range []*Error{ErrTopicNotFound, ErrAuthorization, ErrProducerFenced, ErrTopicTerminated} {
		if e.Retriable {
			t.Errorf("%v should not be retriable", e.Code)
		}
	}
}

func TestErrorCommands(t *testing.T) {
	err := fmt.Errorf("topic t: %w", ErrTopicNotFound)
	if !errors.Is(err, ErrTopicNotFound) || CodeOf(err) != pb.ServerError_TopicNotFound {
		t.Fatal("wrapped server error lost")
	}
	if CodeOf(errors.New("x")) != pb.ServerError_UnknownError {
		t.Fatal("plain error not UnknownError")
	}
	cmd := NewErrorCommand(7, err)
	if _, e := AppendCommand(nil, cmd); e != nil {
		t.Fatal(e)
	}
	if cmd.GetError().GetRequestId() != 7 || cmd.GetError().GetError() != pb.ServerError_TopicNotFound || cmd.GetError().GetMessage() != err.Error() {
		t.Fatalf("%v", cmd)
	}
	se := NewSendErrorCommand(1, 2, fmt.Errorf("send: %w", ErrChecksumMismatch))
	if _, e := AppendCommand(nil, se); e != nil {
		t.Fatal(e)
	}
	if se.GetSendError().GetError() != pb.ServerError_ChecksumError || se.GetSendError().GetProducerId() != 1 || se.GetSendError().GetSequenceId() != 2 {
		t.Fatalf("%v", se)
	}
}
