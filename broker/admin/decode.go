package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/isobar-mq/isobar/broker/adminapi"
)

// DecodePartitions decodes the body of PUT/POST .../partitions: a bare
// JSON integer (what the Pulsar client tests send, e.g. "3") or, as
// pulsaradmin sends with Content-Type
// application/vnd.partitioned-topic-metadata+json, an object
// {"partitions":N,"properties":{...}}. N must be a non-negative int32.
func DecodePartitions(body []byte) (n int, props map[string]string, err error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return 0, nil, errors.New("empty body: want a number of partitions")
	}
	var v int64
	if b[0] == '{' {
		var obj struct {
			Partitions *json.Number      `json:"partitions"`
			Properties map[string]string `json:"properties"`
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&obj); err != nil {
			return 0, nil, fmt.Errorf("partitioned topic metadata: %w", err)
		}
		if d.More() {
			return 0, nil, errors.New("partitioned topic metadata: trailing data")
		}
		if obj.Partitions == nil {
			return 0, nil, errors.New(`partitioned topic metadata: no "partitions"`)
		}
		v, err = strconv.ParseInt(obj.Partitions.String(), 10, 32)
		props = obj.Properties
	} else {
		s := string(b)
		if uq, uerr := strconv.Unquote(s); uerr == nil && len(s) > 0 && s[0] == '"' {
			s = uq
		}
		v, err = strconv.ParseInt(s, 10, 32)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("number of partitions: want an integer: %w", err)
	}
	if v < 0 {
		return 0, nil, fmt.Errorf("number of partitions: %d is negative", v)
	}
	return int(v), props, nil
}

// decodeMessageID decodes an optional MessageId body (PUT subscription,
// POST resetcursor): empty or null means none. partitionIndex and
// batchIndex default to -1.
func decodeMessageID(body []byte) (*adminapi.MessageID, error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var raw struct {
		LedgerID       *int64 `json:"ledgerId"`
		EntryID        *int64 `json:"entryId"`
		PartitionIndex *int   `json:"partitionIndex"`
		BatchIndex     *int   `json:"batchIndex"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("message id: %w", err)
	}
	if raw.LedgerID == nil || raw.EntryID == nil {
		return nil, errors.New("message id: want ledgerId and entryId")
	}
	id := &adminapi.MessageID{LedgerID: *raw.LedgerID, EntryID: *raw.EntryID, PartitionIndex: -1, BatchIndex: -1}
	if raw.PartitionIndex != nil {
		id.PartitionIndex = *raw.PartitionIndex
	}
	if raw.BatchIndex != nil {
		id.BatchIndex = *raw.BatchIndex
	}
	return id, nil
}
