package drill

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// payloadMagic starts every message the drill's workload sends, so a scan
// of a topic that also holds other messages can tell its own apart.
const payloadMagic = "isobar-drill/1"

// ErrPayload is returned for a message that is not a drill payload.
var ErrPayload = errors.New("drill: not a drill payload")

// Payload is what each workload message carries: which run and producer
// sent it, its sequence number in that producer's stream (from 0, no
// gaps) and when it was handed to the client.
type Payload struct {
	Run      string
	Producer int
	Seq      int64
	Sent     time.Time
}

// AppendPayload appends p's encoding to dst: one line of text,
// "isobar-drill/1 <run> <producer> <seq> <sent, Unix nanoseconds>",
// readable in any tool that shows a message. Run must not hold spaces.
func AppendPayload(dst []byte, p Payload) []byte {
	dst = append(dst, payloadMagic...)
	dst = append(dst, ' ')
	dst = append(dst, p.Run...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(p.Producer), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, p.Seq, 10)
	dst = append(dst, ' ')
	return strconv.AppendInt(dst, p.Sent.UnixNano(), 10)
}

// ParsePayload decodes what AppendPayload wrote; anything else (another
// application's message, a truncated one) is ErrPayload.
func ParsePayload(b []byte) (Payload, error) {
	f := strings.Split(string(b), " ")
	if len(f) != 5 || f[0] != payloadMagic || f[1] == "" {
		return Payload{}, ErrPayload
	}
	prod, err1 := strconv.Atoi(f[2])
	seq, err2 := strconv.ParseInt(f[3], 10, 64)
	sent, err3 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || prod < 0 || seq < 0 {
		return Payload{}, ErrPayload
	}
	return Payload{Run: f[1], Producer: prod, Seq: seq, Sent: time.Unix(0, sent)}, nil
}
