package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// newProbeCmd is `isobar probe URL`: a health check for images with no
// shell or curl (the container image is FROM scratch). It exits 0 when a
// GET of URL answers 2xx within --timeout, else 1 with the reason on
// stderr, which Docker keeps in the container's health log.
func newProbeCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe <url>",
		Short: "Exit 0 if a GET of URL answers 2xx in time, else 1 (container health checks)",
		Long: `GET the URL (for example http://127.0.0.1:8080/readyz) and exit 0 when
it answers with a 2xx status within --timeout; otherwise exit 1 and print
the reason (the status and the start of the body, or the error) on stderr.
Meant for container HEALTHCHECKs: the isobar image has no shell or curl.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("want exactly one URL argument, got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageError{fmt.Errorf("--timeout: %v must be positive", timeout)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return probe(ctx, args[0])
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}

// probe GETs raw and returns nil for a 2xx answer, else an error saying
// why (the status and the start of the body, or the request's error).
func probe(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("probe: %q is not an http:// or https:// URL", raw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("probe: %s: no answer in time", raw)
		}
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	msg := strings.TrimSpace(string(body))
	if !utf8.ValidString(msg) {
		msg = fmt.Sprintf("%q", msg)
	}
	if msg != "" {
		return fmt.Errorf("probe: %s: %s: %s", raw, resp.Status, msg)
	}
	return fmt.Errorf("probe: %s: %s", raw, resp.Status)
}
