package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const defaultServiceURL = "pulsar://localhost:6650"

// newClientCmd is `isobar client produce|consume`, shaped like Pulsar's
// pulsar-client: it talks to any Pulsar-protocol broker.
func newClientCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Produce and consume messages with the Pulsar protocol (like pulsar-client)",
	}
	for _, c := range []*cobra.Command{newClientProduceCmd(g), newClientConsumeCmd(g)} {
		c.Flags().SetNormalizeFunc(pulsarClientNames)
		c.Flags().Lookup("service-url").Usage += "; --url as well, as pulsar-client names it"
		cmd.AddCommand(c)
	}
	return cmd
}

// pulsarClientNames takes pulsar-client's --url for --service-url.
func pulsarClientNames(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if name == "url" {
		name = "service-url"
	}
	return pflag.NormalizedName(name)
}

type clientProduceFlags struct {
	connFlags
	messages   []string
	count      int
	key        string
	properties []string
}

func newClientProduceCmd(g *globalFlags) *cobra.Command {
	f := &clientProduceFlags{}
	cmd := &cobra.Command{
		Use:   "produce <topic>",
		Short: "Send messages; prints one message id (ledger:entry:partition:batch) per message",
		Args:  oneTopicArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			props, err := f.validate(args[0])
			if err != nil {
				return err
			}
			logger, err := g.logger()
			if err != nil {
				return err
			}
			// --timeout bounds the whole command: the check, the
			// producer's creation and every send.
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			if err := checkBroker(ctx, f.connFlags, args[0]); err != nil {
				return err
			}
			client, err := newPulsarClient(f.connFlags, logger, 1)
			if err != nil {
				return err
			}
			defer client.Close()
			producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: args[0]})
			if err != nil {
				return f.failed(ctx, "create producer on "+args[0], err)
			}
			defer producer.Close()
			out := cmd.OutOrStdout()
			for i := 0; i < f.count; i++ {
				for _, m := range f.messages {
					id, err := producer.Send(ctx, &pulsar.ProducerMessage{
						Payload:    []byte(m),
						Key:        f.key,
						Properties: props,
					})
					if err != nil {
						return f.failed(ctx, "send to "+args[0], err)
					}
					fmt.Fprintln(out, formatMessageID(id))
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	f.bind(fl)
	fl.StringArrayVarP(&f.messages, "messages", "m", nil, "message payload (repeatable; required)")
	fl.IntVarP(&f.count, "num-produce", "n", 1, "send the messages this many times")
	fl.StringVarP(&f.key, "key", "k", "", "partition key of every message")
	fl.StringSliceVarP(&f.properties, "properties", "p", nil, "message properties k=v,k2=v2 (repeatable)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up when the whole command (connecting, creating the producer, every send) takes longer")
	return cmd
}

// validate checks every flag and reports all problems at once.
func (f *clientProduceFlags) validate(topic string) (map[string]string, error) {
	var errs []error
	if err := f.connFlags.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(f.messages) == 0 {
		errs = append(errs, errors.New("-m/--messages: at least one message is required"))
	}
	if f.count < 1 {
		errs = append(errs, fmt.Errorf("-n/--num-produce: %d must be at least 1", f.count))
	}
	props, err := parseProperties(f.properties)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usageError{err}
	}
	return props, nil
}

type clientConsumeFlags struct {
	connFlags
	subscription string
	subType      string
	count        int
	position     string
	asJSON       bool
}

func newClientConsumeCmd(g *globalFlags) *cobra.Command {
	f := &clientConsumeFlags{}
	cmd := &cobra.Command{
		Use:   "consume <topic>",
		Short: "Receive and acknowledge messages; prints each payload on its own line (--json: every field)",
		Args:  oneTopicArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, pos, err := f.validate()
			if err != nil {
				return err
			}
			logger, err := g.logger()
			if err != nil {
				return err
			}
			// --timeout bounds connecting and subscribing; messages
			// may take any time to come.
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			if err := checkBroker(ctx, f.connFlags, args[0]); err != nil {
				return err
			}
			client, err := newPulsarClient(f.connFlags, logger, 1)
			if err != nil {
				return err
			}
			defer client.Close()
			consumer, err := client.Subscribe(pulsar.ConsumerOptions{
				Topic:                       args[0],
				SubscriptionName:            f.subscription,
				Type:                        st,
				SubscriptionInitialPosition: pos,
			})
			if err != nil {
				return f.failed(ctx, fmt.Sprintf("subscribe %s to %s", f.subscription, args[0]), err)
			}
			cancel()
			defer consumer.Close()
			enc := json.NewEncoder(cmd.OutOrStdout())
			for got := 0; f.count == 0 || got < f.count; got++ {
				msg, err := consumer.Receive(cmd.Context())
				if err != nil {
					if cmd.Context().Err() != nil {
						if f.count == 0 {
							return nil // interrupted while consuming forever
						}
						return fmt.Errorf("interrupted after %d of %d messages", got, f.count)
					}
					return fmt.Errorf("receive: %w", err)
				}
				if f.asJSON {
					err = enc.Encode(toJSONMessage(msg))
				} else {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", msg.Payload())
				}
				if err != nil {
					return err
				}
				if err := consumer.Ack(msg); err != nil {
					return fmt.Errorf("ack %s: %w", formatMessageID(msg.ID()), err)
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	f.bind(fl)
	fl.StringVarP(&f.subscription, "subscription-name", "s", "", "subscription name (required)")
	fl.StringVarP(&f.subType, "subscription-type", "t", "Exclusive", "Exclusive, Shared, Failover or KeyShared")
	fl.IntVarP(&f.count, "num-messages", "n", 1, "messages to consume; 0 = until interrupted")
	fl.StringVarP(&f.position, "subscription-position", "p", "Latest", "where a new subscription starts: Earliest or Latest")
	fl.BoolVar(&f.asJSON, "json", false, "print each message as a JSON object")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up when connecting and subscribing take longer (receiving is not bounded)")
	return cmd
}

func (f *clientConsumeFlags) validate() (pulsar.SubscriptionType, pulsar.SubscriptionInitialPosition, error) {
	var errs []error
	if err := f.connFlags.validate(); err != nil {
		errs = append(errs, err)
	}
	if f.subscription == "" {
		errs = append(errs, errors.New("-s/--subscription-name: required"))
	}
	if f.count < 0 {
		errs = append(errs, fmt.Errorf("-n/--num-messages: %d is negative", f.count))
	}
	st, err := parseSubscriptionType(f.subType)
	if err != nil {
		errs = append(errs, err)
	}
	pos, err := parseInitialPosition(f.position)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, usageError{err}
	}
	return st, pos, nil
}

// jsonMessage is one consumed message as `isobar client consume --json`
// prints it. Payload is the text when it is valid UTF-8, else PayloadBase64.
type jsonMessage struct {
	ID              string            `json:"id"`
	Topic           string            `json:"topic"`
	Key             string            `json:"key,omitempty"`
	Properties      map[string]string `json:"properties,omitempty"`
	Producer        string            `json:"producer"`
	PublishTime     time.Time         `json:"publish_time"`
	EventTime       *time.Time        `json:"event_time,omitempty"`
	RedeliveryCount uint32            `json:"redelivery_count"`
	Payload         *string           `json:"payload,omitempty"`
	PayloadBase64   []byte            `json:"payload_base64,omitempty"`
}

func toJSONMessage(m pulsar.Message) jsonMessage {
	j := jsonMessage{
		ID:              formatMessageID(m.ID()),
		Topic:           m.Topic(),
		Key:             m.Key(),
		Properties:      m.Properties(),
		Producer:        m.ProducerName(),
		PublishTime:     m.PublishTime(),
		RedeliveryCount: m.RedeliveryCount(),
	}
	if et := m.EventTime(); !et.IsZero() && et.UnixNano() != 0 {
		j.EventTime = &et
	}
	if p := m.Payload(); utf8.Valid(p) {
		s := string(p)
		j.Payload = &s
	} else {
		j.PayloadBase64 = p
	}
	return j
}

// formatMessageID prints an id as ledger:entry:partition:batch.
func formatMessageID(id pulsar.MessageID) string {
	return fmt.Sprintf("%d:%d:%d:%d", id.LedgerID(), id.EntryID(), id.PartitionIdx(), id.BatchIdx())
}

// oneTopicArg accepts exactly one well-formed topic name.
func oneTopicArg(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError{fmt.Errorf("want exactly one topic argument, got %d", len(args))}
	}
	if _, err := restTopicPath(args[0]); err != nil {
		return usageError{err}
	}
	return nil
}

// restTopicPath turns a topic name (short "t", "tenant/ns/t" or
// "persistent://tenant/ns/t") into the admin REST path
// "persistent/tenant/ns/t".
func restTopicPath(topic string) (string, error) {
	domain, rest := "persistent", topic
	if i := strings.Index(topic, "://"); i >= 0 {
		domain, rest = topic[:i], topic[i+3:]
	}
	if domain != "persistent" && domain != "non-persistent" {
		return "", fmt.Errorf("topic %q: domain %q is not persistent or non-persistent", topic, domain)
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 1:
		parts = []string{"public", "default", parts[0]}
	case 3:
	default:
		return "", fmt.Errorf("topic %q: want name, tenant/namespace/name or domain://tenant/namespace/name", topic)
	}
	for i, p := range parts {
		if p == "" {
			return "", fmt.Errorf("topic %q: empty name part", topic)
		}
		parts[i] = url.PathEscape(p)
	}
	return domain + "/" + strings.Join(parts, "/"), nil
}

func validateServiceURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "pulsar" && u.Scheme != "pulsar+ssl") || u.Host == "" {
		return fmt.Errorf("--service-url: %q is not pulsar://host:port or pulsar+ssl://host:port", s)
	}
	return nil
}

func parseProperties(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	props := make(map[string]string, len(kvs))
	var errs []error
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			errs = append(errs, fmt.Errorf("--properties: %q is not key=value", kv))
			continue
		}
		props[k] = v
	}
	return props, errors.Join(errs...)
}

func parseSubscriptionType(s string) (pulsar.SubscriptionType, error) {
	switch strings.ToLower(strings.ReplaceAll(s, "_", "")) {
	case "exclusive":
		return pulsar.Exclusive, nil
	case "shared":
		return pulsar.Shared, nil
	case "failover":
		return pulsar.Failover, nil
	case "keyshared":
		return pulsar.KeyShared, nil
	}
	return 0, fmt.Errorf("-t/--subscription-type: %q is not Exclusive, Shared, Failover or KeyShared", s)
}

func parseInitialPosition(s string) (pulsar.SubscriptionInitialPosition, error) {
	switch strings.ToLower(s) {
	case "latest":
		return pulsar.SubscriptionPositionLatest, nil
	case "earliest":
		return pulsar.SubscriptionPositionEarliest, nil
	}
	return 0, fmt.Errorf("-p/--subscription-position: %q is not Earliest or Latest", s)
}

// connFlags say how a command reaches the brokers: the service URL and,
// for a secured broker (docs/security.md), the CAs to trust and the token
// to send, as pulsar-client-go's TLSTrustCertsFilePath and
// NewAuthenticationTokenFromFile take them.
type connFlags struct {
	serviceURL, tokenFile, trustCerts string
	// timeout bounds what the command says it bounds (its --timeout,
	// bound by the commands that have one); the client library's
	// operations are bounded by it too. Zero: the library's defaults.
	timeout time.Duration
}

func (c *connFlags) bind(fl *pflag.FlagSet) {
	fl.StringVarP(&c.serviceURL, "service-url", "u", envOr("ISOBAR_SERVICE_URL", defaultServiceURL), "broker URL, pulsar://host:port or pulsar+ssl://host:port (env ISOBAR_SERVICE_URL)")
	fl.StringVar(&c.tokenFile, "token-file", os.Getenv("ISOBAR_TOKEN_FILE"), "file holding the token to authenticate with (env ISOBAR_TOKEN_FILE)")
	fl.StringVar(&c.trustCerts, "tls-trust-certs-file", os.Getenv("ISOBAR_TLS_TRUST_CERTS_FILE"), "PEM file of the CAs a pulsar+ssl:// broker's certificate chains to (env ISOBAR_TLS_TRUST_CERTS_FILE)")
}

// validate checks the connection flags of a command with --timeout.
func (c *connFlags) validate() error {
	var errs []error
	if err := validateServiceURL(c.serviceURL); err != nil {
		errs = append(errs, err)
	}
	if c.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout: %v must be positive", c.timeout))
	}
	return errors.Join(errs...)
}

// failed is the error for op failing with err, from the client library:
// when ctx (the command's --timeout) ended first, it says so.
func (c *connFlags) failed(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil && c.timeout > 0 {
		return &clientError{reason: fmt.Sprintf("%s: no answer within --timeout %v: %v", op, c.timeout, err),
			hint: "run again with --log-level debug to see the client's attempts, or a longer --timeout"}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// newPulsarClient connects lazily to the brokers c names. The client
// library logs through logger, its errors only unless debug is on: it
// logs a warning per retry of a connection or lookup, and the command
// reports the failure that ends them itself.
func newPulsarClient(c connFlags, logger *slog.Logger, conns int) (pulsar.Client, error) {
	lvl := slog.LevelError
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		lvl = slog.LevelDebug
	}
	quiet := slog.New(minLevelHandler{logger.Handler(), lvl})
	opts := pulsar.ClientOptions{
		URL:                     c.serviceURL,
		Logger:                  plog.NewLoggerWithSlog(quiet),
		MaxConnectionsPerBroker: max(conns, 1),
		TLSTrustCertsFilePath:   c.trustCerts,
		OperationTimeout:        c.timeout,
		ConnectionTimeout:       min(c.timeout, checkTimeout),
	}
	if c.tokenFile != "" {
		if _, err := os.Stat(c.tokenFile); err != nil {
			return nil, usageError{fmt.Errorf("--token-file: %w", err)}
		}
		opts.Authentication = pulsar.NewAuthenticationTokenFromFile(c.tokenFile)
	}
	client, err := pulsar.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("pulsar client for %s: %w", c.serviceURL, err)
	}
	return client, nil
}

// minLevelHandler drops records below min.
type minLevelHandler struct {
	slog.Handler
	min slog.Level
}

func (h minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevelHandler{h.Handler.WithAttrs(as), h.min}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{h.Handler.WithGroup(name), h.min}
}
