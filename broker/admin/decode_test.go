package admin

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/policy"
)

var partitionsTests = []struct {
	in    string
	n     int
	props map[string]string
	ok    bool
}{
	{"3", 3, nil, true},
	{" 64\n", 64, nil, true},
	{`"5"`, 5, nil, true},
	{"0", 0, nil, true},
	{`{"properties":null,"partitions":2}`, 2, nil, true},
	{`{"partitions":4,"properties":{"a":"b"}}`, 4, map[string]string{"a": "b"}, true},
	{"", 0, nil, false},
	{"-1", 0, nil, false},
	{"1.5", 0, nil, false},
	{"abc", 0, nil, false},
	{"99999999999", 0, nil, false},
	{`{"partitions":-2}`, 0, nil, false},
	{`{"properties":{}}`, 0, nil, false},
	{`{"partitions":2}{}`, 0, nil, false},
	{`{"partitions":"2"}`, 2, nil, true}, // json.Number, like Jackson, takes a quoted number
	{"null", 0, nil, false},
}

func TestDecodePartitions(t *testing.T) {
	for _, tt := range partitionsTests {
		n, props, err := DecodePartitions([]byte(tt.in))
		if (err == nil) != tt.ok || n != tt.n || !maps.Equal(props, tt.props) {
			t.Errorf("DecodePartitions(%q) = %d, %v, %v; want %d, %v, ok=%v", tt.in, n, props, err, tt.n, tt.props, tt.ok)
		}
	}
}

func FuzzDecodePartitions(f *testing.F) {
	for _, tt := range partitionsTests {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, _, err := DecodePartitions(b)
		if err == nil && (n < 0 || n > 1<<31-1) {
			t.Fatalf("DecodePartitions(%q) = %d without error", b, n)
		}
		if err != nil && n != 0 {
			t.Fatalf("DecodePartitions(%q) = %d with error %v", b, n, err)
		}
	})
}

var messageIDTests = []struct {
	in   string
	want *adminapi.MessageID
	ok   bool
}{
	{"", nil, true},
	{"null", nil, true},
	{`{"ledgerId":1,"entryId":2}`, &adminapi.MessageID{LedgerID: 1, EntryID: 2, PartitionIndex: -1, BatchIndex: -1}, true},
	{`{"ledgerId":-1,"entryId":-1,"partitionIndex":3,"batchIndex":0}`, &adminapi.MessageID{LedgerID: -1, EntryID: -1, PartitionIndex: 3}, true},
	{`{"ledgerId":1}`, nil, false},
	{`{"ledgerId":"1","entryId":2}`, nil, false},
	{`[1,2]`, nil, false},
}

func TestDecodeMessageID(t *testing.T) {
	for _, tt := range messageIDTests {
		got, err := decodeMessageID([]byte(tt.in))
		if (err == nil) != tt.ok || (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("decodeMessageID(%q) = %+v, %v; want %+v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzDecodeMessageID(f *testing.F) {
	for _, tt := range messageIDTests {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeMessageID(b)
		if err != nil && id != nil {
			t.Fatalf("decodeMessageID(%q) = %+v with error %v", b, id, err)
		}
	})
}

func FuzzDecodeEntryResponse(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 2, 0x0a, 0x00, 'x'})
	f.Add([]byte{0, 0, 0, 99})
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := decodeEntryResponse(b, 1, 2, nil)
		if err == nil && resp.header.Get("X-Pulsar-Message-ID") != "1:2" {
			t.Fatalf("no message id header: %v", resp.header)
		}
	})
}

// FuzzTopicPolicyBodies feeds every topic policy's decoder any body: it
// either refuses it or sets a value that encodes, and never panics.
func FuzzTopicPolicyBodies(f *testing.F) {
	for _, s := range []string{"3", "-1", "null", `"BACKWARD"`, "BACKWARD", `{"retentionTimeInMinutes":1}`, `["a"]`, `{"active":true,"tickTime":1}`, "", "{", "1e400"} {
		for i := range topicPolicies {
			f.Add(i, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, i int, body []byte) {
		if i < 0 {
			i = -i
		}
		p := topicPolicies[i%len(topicPolicies)]
		r := httptest.NewRequest(http.MethodPost, "/x", nil)
		var tp policy.TopicPolicies
		if p.set(r, body, &tp) != nil {
			return
		}
		if _, err := json.Marshal(p.get(&tp)); err != nil {
			t.Fatalf("%s: %q decoded to a value that does not encode: %v", p.path, body, err)
		}
	})
}
