// Package payloadgen owns the realistic payload set that compression is
// measured on: JSON messages of the shapes a platform sends (order
// events, device telemetry, user profile updates, structured log lines),
// 200 B to 2 KiB each, generated deterministically from a seed, and a
// drifted variant of the order events (renamed and new fields) that
// stands for a producer's schema change. It is for tests and benchmarks;
// testdata/sample.jsonl holds the first messages of each shape, checked
// against the generator by its test.
package payloadgen

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"time"
)

// Shape is a kind of message, sent on the topics of one namespace.
type Shape string

// The shapes of the payload set. Each is the traffic of one namespace
// (Namespace); OrdersV2 is Orders after a schema change, on the same
// namespace.
const (
	Orders    Shape = "orders"
	Telemetry Shape = "telemetry"
	Users     Shape = "users"
	Logs      Shape = "logs"
	OrdersV2  Shape = "orders-v2"
)

// Shapes are the shapes of the set before drift.
var Shapes = []Shape{Orders, Telemetry, Users, Logs}

// Namespace is the namespace whose topics carry s.
func Namespace(s Shape) string {
	switch s {
	case Orders, OrdersV2:
		return "shop/orders"
	case Telemetry:
		return "iot/telemetry"
	case Users:
		return "accounts/profiles"
	default:
		return "platform/logs"
	}
}

// Generator makes the messages of one shape. Two generators with the
// same shape and seed make the same messages.
type Generator struct {
	shape Shape
	rng   *rand.Rand
	now   time.Time
	n     int
	// Small populations that repeat, as real ones do.
	customers, devices, users, hosts []string
}

// New returns a generator of shape s seeded with seed.
func New(s Shape, seed int64) *Generator {
	g := &Generator{shape: s, rng: rand.New(rand.NewSource(seed)), now: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	g.customers = g.ids("cus_", 2000, 14)
	g.devices = g.ids("dev-", 500, 8)
	g.users = g.ids("usr_", 3000, 12)
	g.hosts = g.ids("ip-10-", 40, 6)
	return g
}

// Messages returns the next n messages.
func (g *Generator) Messages(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

// Next returns the next message.
func (g *Generator) Next() []byte {
	g.n++
	g.now = g.now.Add(time.Duration(g.rng.Intn(40_000)) * time.Microsecond)
	var v any
	switch g.shape {
	case Orders:
		v = g.order()
	case OrdersV2:
		v = g.orderV2()
	case Telemetry:
		v = g.telemetry()
	case Users:
		v = g.user()
	default:
		v = g.logLine()
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("payloadgen: %v", err)) // only plain values above
	}
	return b
}

// obj is a JSON object whose keys keep their order, as an encoder in a
// service would write them.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

func (g *Generator) ids(prefix string, n, width int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + g.alnum(width)
	}
	return out
}

const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

func (g *Generator) alnum(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.rng.Intn(len(alphabet))]
	}
	return string(b)
}

func (g *Generator) hex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.rng.Intn(16)]
	}
	return string(b)
}

func (g *Generator) uuid() string {
	h := g.hex(32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-" + h[16:20] + "-" + h[20:]
}

func (g *Generator) pick(s []string) string { return s[g.rng.Intn(len(s))] }

// skewed picks from s with a bias to the first elements (popular values).
func (g *Generator) skewed(s []string) string {
	i := int(float64(len(s)) * g.rng.Float64() * g.rng.Float64())
	return s[i]
}

func (g *Generator) money(lo, hi float64) float64 {
	return float64(int((lo+g.rng.Float64()*(hi-lo))*100)) / 100
}

func (g *Generator) round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p)) / p
}

func (g *Generator) ts() string { return g.now.Format("2006-01-02T15:04:05.000Z07:00") }

func (g *Generator) sentence(minWords, maxWords int) string {
	n := minWords + g.rng.Intn(maxWords-minWords+1)
	w := make([]string, n)
	for i := range w {
		w[i] = g.skewed(words)
	}
	s := strings.Join(w, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

var (
	words = strings.Fields(`the a to and of for on with please delivery package order door leave
		call before after weekend morning evening gift wrap fragile thanks neighbour office
		reception back side gate code floor building ring bell twice not working parcel box
		available between noon pm am hours instructions apartment left right second third`)
	products = []string{"Wireless Mouse", "USB-C Cable 2m", "Mechanical Keyboard", "27in Monitor",
		"Laptop Stand", "Noise Cancelling Headphones", "Webcam 1080p", "Desk Lamp", "Ergonomic Chair",
		"Phone Case", "Screen Protector", "Portable SSD 1TB", "HDMI Adapter", "Bluetooth Speaker",
		"Smart Plug", "Coffee Grinder", "Water Bottle 750ml", "Running Shoes", "Yoga Mat", "Backpack 25L"}
	cities = []string{"Lisbon", "Porto", "Madrid", "Berlin", "Hamburg", "Paris", "Lyon", "Amsterdam",
		"Rotterdam", "Milan", "Vienna", "Warsaw", "Prague", "Dublin", "Copenhagen", "Stockholm"}
	countries = []string{"PT", "ES", "DE", "FR", "NL", "IT", "AT", "PL", "CZ", "IE", "DK", "SE"}
	streets   = []string{"Main Street", "Station Road", "Church Lane", "Park Avenue", "Harbour Way",
		"Mill Road", "High Street", "Kings Road", "Garden Row", "River Walk"}
	orderEvents = []string{"order.created", "order.created", "order.paid", "order.paid", "order.packed",
		"order.shipped", "order.delivered", "order.cancelled", "order.refunded"}
	apps       = []string{"web", "web", "ios", "android", "pos"}
	appVers    = []string{"5.12.3", "5.12.4", "5.13.0", "5.11.9"}
	shipping   = []string{"standard", "standard", "express", "pickup", "next_day"}
	payMethods = []string{"card", "card", "card", "paypal", "sepa_debit", "apple_pay", "gift_card"}
	sites      = []string{"plant-lisbon-1", "plant-porto-2", "warehouse-madrid", "dc-berlin-north", "dc-paris-east"}
	firmwares  = []string{"2.3.1", "2.3.1", "2.4.0", "2.2.7"}
	models     = []string{"TH-200", "TH-210", "VX-9", "PM-3"}
	statuses   = []string{"ok", "ok", "ok", "ok", "ok", "ok", "warn", "fault"}
	locales    = []string{"en-GB", "en-US", "pt-PT", "es-ES", "de-DE", "fr-FR", "nl-NL", "it-IT"}
	zones      = []string{"Europe/Lisbon", "Europe/Madrid", "Europe/Berlin", "Europe/Paris", "Europe/Amsterdam", "America/New_York"}
	firstNames = []string{"Ana", "João", "Maria", "Lukas", "Sofia", "Emma", "Noah", "Lucas", "Mia", "Hugo", "Lea", "Marco", "Julia", "Tom", "Ines"}
	lastNames  = []string{"Silva", "Santos", "Müller", "Schmidt", "Garcia", "Martin", "Bernard", "de Vries", "Rossi", "Novak", "Murphy", "Jensen"}
	actors     = []string{"user", "user", "user", "admin", "system"}
	agents     = []string{"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
		"okhttp/4.12.0", "ShopApp/5.12.3 (Android 14; Pixel 8)"}
	services = []string{"checkout", "checkout", "catalog", "catalog", "catalog", "payments", "auth", "search", "inventory", "notifications"}
	levels   = []string{"info", "info", "info", "info", "info", "debug", "debug", "warn", "error"}
	paths    = []string{"/api/v1/cart", "/api/v1/cart/items", "/api/v1/products/{id}", "/api/v1/search",
		"/api/v1/orders", "/api/v1/orders/{id}", "/api/v1/payments/intent", "/api/v1/session", "/healthz"}
	methods  = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	httpCode = []int{200, 200, 200, 200, 200, 201, 204, 304, 400, 401, 404, 409, 429, 500, 503}
	logMsgs  = []string{"request completed", "request completed", "cache miss for key %s", "retrying upstream call to %s (attempt %d)",
		"user %s authenticated via password", "inventory reserved for order %s", "slow query on table %s took %dms",
		"published event %s to topic %s", "rate limit exceeded for client %s", "payment intent %s confirmed"}
	errTypes = []string{"context.DeadlineExceeded", "pq: deadlock detected", "io.ErrUnexpectedEOF", "grpc: Unavailable"}
)

func (g *Generator) address() obj {
	return obj{
		{"line1", fmt.Sprintf("%d %s", 1+g.rng.Intn(300), g.pick(streets))},
		{"city", g.skewed(cities)},
		{"postal_code", fmt.Sprintf("%04d-%03d", 1000+g.rng.Intn(9000), g.rng.Intn(1000))},
		{"country", g.skewed(countries)},
	}
}

func (g *Generator) items(max int) ([]obj, float64) {
	n := 1 + int(float64(max)*g.rng.Float64()*g.rng.Float64())
	var total float64
	items := make([]obj, n)
	for i := range items {
		p := g.rng.Intn(len(products))
		price := float64(500+p*731%15000) / 100
		qty := 1 + int(3*g.rng.Float64()*g.rng.Float64())
		total += price * float64(qty)
		items[i] = obj{{"sku", fmt.Sprintf("SKU-%05d", 10000+p*137)}, {"name", products[p]}, {"qty", qty}, {"unit_price", price}}
	}
	return items, g.round(total, 2)
}

func (g *Generator) order() obj {
	ev := g.pick(orderEvents)
	items, total := g.items(8)
	o := obj{
		{"id", fmt.Sprintf("ord_%s", g.alnum(16))},
		{"customer_id", g.skewed(g.customers)},
		{"status", strings.TrimPrefix(ev, "order.")},
		{"currency", "EUR"},
		{"total", total},
		{"items", items},
	}
	if ev != "order.cancelled" && ev != "order.refunded" {
		o = append(o, kv{"shipping", obj{{"method", g.pick(shipping)}, {"address", g.address()}}})
		o = append(o, kv{"payment", obj{{"method", g.pick(payMethods)}, {"captured", ev != "order.created"}}})
	}
	if g.rng.Intn(4) == 0 {
		o = append(o, kv{"note", g.sentence(4, 25)})
	}
	return obj{
		{"type", ev},
		{"event_id", g.uuid()},
		{"occurred_at", g.ts()},
		{"order", o},
		{"source", obj{{"app", g.pick(apps)}, {"version", g.pick(appVers)}}},
		{"trace_id", g.hex(32)},
	}
}

// orderV2 is the order event after the producer's schema change:
// camelCase keys, an envelope, a fulfilment block, prices in cents.
func (g *Generator) orderV2() obj {
	ev := g.pick(orderEvents)
	items, total := g.items(8)
	lines := make([]obj, len(items))
	for i, it := range items {
		lines[i] = obj{{"productRef", it[0].v}, {"title", it[1].v}, {"quantity", it[2].v},
			{"priceCents", int(it[3].v.(float64) * 100)}, {"taxRate", 0.23}, {"warehouse", g.pick(sites)}}
	}
	return obj{
		{"specversion", "1.0"},
		{"schema", "com.example.shop.OrderEvent/v2"},
		{"eventName", strings.ReplaceAll(ev, ".", "_")},
		{"eventId", g.uuid()},
		{"eventTime", g.now.UnixMilli()},
		{"data", obj{
			{"orderRef", fmt.Sprintf("ORD-%d-%s", 2026, g.alnum(10))},
			{"customerRef", g.skewed(g.customers)},
			{"totals", obj{{"grossCents", int(total * 100)}, {"currencyCode", "EUR"}, {"itemCount", len(items)}}},
			{"lineItems", lines},
			{"fulfilment", obj{{"mode", strings.ToUpper(g.pick(shipping))}, {"promisedBy", g.now.Add(72 * time.Hour).Format(time.RFC3339)},
				{"destination", g.address()}, {"carrier", g.pick([]string{"DHL", "UPS", "CTT", "GLS", "PostNL"})}}},
			{"channel", strings.ToUpper(g.pick(apps))},
		}},
		{"traceparent", "00-" + g.hex(32) + "-" + g.hex(16) + "-01"},
	}
}

func (g *Generator) telemetry() obj {
	dev := g.skewed(g.devices)
	r := obj{
		{"temperature_c", g.round(18+g.rng.NormFloat64()*3, 2)},
		{"humidity_pct", g.round(45+g.rng.NormFloat64()*8, 1)},
		{"pressure_hpa", g.round(1013+g.rng.NormFloat64()*4, 1)},
	}
	if g.rng.Intn(2) == 0 {
		r = append(r, kv{"vibration_rms", g.round(g.rng.ExpFloat64()*0.2, 4)}, kv{"current_a", g.round(3+g.rng.Float64()*2, 3)})
	}
	m := obj{
		{"device_id", dev},
		{"model", g.pick(models)},
		{"fw", g.pick(firmwares)},
		{"site", g.skewed(sites)},
		{"ts", g.now.UnixMilli()},
		{"seq", g.n},
		{"readings", r},
		{"battery_pct", 20 + g.rng.Intn(81)},
		{"rssi_dbm", -40 - g.rng.Intn(60)},
		{"status", g.pick(statuses)},
	}
	// A device sometimes flushes a buffer of readings taken while offline.
	if g.rng.Intn(6) == 0 {
		n := 2 + g.rng.Intn(14)
		buf := make([]obj, n)
		for i := range buf {
			buf[i] = obj{{"ts", g.now.Add(-time.Duration(n-i) * 10 * time.Second).UnixMilli()},
				{"temperature_c", g.round(18+g.rng.NormFloat64()*3, 2)}, {"humidity_pct", g.round(45+g.rng.NormFloat64()*8, 1)}}
		}
		m = append(m, kv{"buffered", buf})
	}
	return m
}

func (g *Generator) user() obj {
	changes := obj{}
	fields := 1 + g.rng.Intn(4)
	for range fields {
		switch g.rng.Intn(7) {
		case 0:
			fn, ln := g.pick(firstNames), g.pick(lastNames)
			changes = append(changes, kv{"display_name", fn + " " + ln})
		case 1:
			changes = append(changes, kv{"email", strings.ToLower(g.alnum(8)) + "@" + g.pick([]string{"gmail.com", "outlook.com", "proton.me", "example.org"})})
		case 2:
			changes = append(changes, kv{"locale", g.pick(locales)}, kv{"timezone", g.pick(zones)})
		case 3:
			changes = append(changes, kv{"preferences", obj{{"newsletter", g.rng.Intn(2) == 0}, {"theme", g.pick([]string{"light", "dark", "system"})},
				{"notifications", obj{{"email", g.rng.Intn(2) == 0}, {"push", g.rng.Intn(2) == 0}, {"sms", false}}}}})
		case 4:
			changes = append(changes, kv{"shipping_address", g.address()})
		case 5:
			changes = append(changes, kv{"phone", fmt.Sprintf("+351 9%d %03d %03d", g.rng.Intn(10), g.rng.Intn(1000), g.rng.Intn(1000))})
		default:
			changes = append(changes, kv{"bio", g.sentence(5, 30)})
		}
	}
	actor := g.pick(actors)
	m := obj{
		{"event", "user.profile_updated"},
		{"user_id", g.skewed(g.users)},
		{"updated_at", g.ts()},
		{"profile_version", 1 + g.rng.Intn(60)},
		{"changes", changes},
		{"actor", obj{{"type", actor}, {"id", g.skewed(g.users)}}},
	}
	if actor == "user" {
		m = append(m, kv{"request", obj{{"ip", fmt.Sprintf("%d.%d.%d.%d", 80+g.rng.Intn(100), g.rng.Intn(256), g.rng.Intn(256), g.rng.Intn(256))},
			{"user_agent", g.pick(agents)}, {"request_id", g.uuid()}}})
	}
	return m
}

func (g *Generator) logLine() obj {
	svc := g.skewed(services)
	lvl := g.pick(levels)
	msg := g.pick(logMsgs)
	if strings.Contains(msg, "%") {
		args := []any{}
		for range strings.Count(msg, "%") {
			if g.rng.Intn(2) == 0 {
				args = append(args, g.alnum(10))
			} else {
				args = append(args, g.rng.Intn(2000))
			}
		}
		msg = fmt.Sprintf(strings.ReplaceAll(strings.ReplaceAll(msg, "%s", "%v"), "%d", "%v"), args...)
	}
	m := obj{
		{"ts", g.ts()},
		{"level", lvl},
		{"service", svc},
		{"host", g.skewed(g.hosts)},
		{"pod", fmt.Sprintf("%s-%s-%s", svc, g.hex(10), g.alnum(5))},
		{"msg", msg},
	}
	if g.rng.Intn(3) > 0 {
		p := g.pick(paths)
		if strings.Contains(p, "{id}") {
			p = strings.Replace(p, "{id}", g.alnum(12), 1)
		}
		m = append(m, kv{"http", obj{{"method", g.pick(methods)}, {"path", p}, {"status", httpCode[g.rng.Intn(len(httpCode))]},
			{"duration_ms", g.round(g.rng.ExpFloat64()*40, 3)}, {"bytes", g.rng.Intn(40000)}, {"user_agent", g.pick(agents)}}})
	}
	m = append(m, kv{"trace_id", g.hex(32)}, kv{"span_id", g.hex(16)})
	if lvl == "error" || lvl == "warn" && g.rng.Intn(2) == 0 {
		frames := make([]string, 3+g.rng.Intn(10))
		for i := range frames {
			frames[i] = fmt.Sprintf("example.com/%s/internal/%s.(*%s).%s(...)\n\t/src/%s/%s.go:%d",
				svc, g.pick(services), g.pick([]string{"Handler", "Store", "Client", "Worker"}), g.pick([]string{"Serve", "Get", "Put", "call", "run", "Do"}),
				svc, g.pick([]string{"handler", "store", "client", "worker"}), 20+g.rng.Intn(600))
		}
		m = append(m, kv{"error", obj{{"type", g.pick(errTypes)}, {"stack", strings.Join(frames, "\n")}}})
	}
	return m
}
