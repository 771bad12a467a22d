package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// applyFile is what `isobar admin apply` reads: the tenants and namespaces
// a federation should have (deploy/compose/config/init.yaml).
type applyFile struct {
	Tenants []struct {
		Name            string   `yaml:"name"`
		AdminRoles      []string `yaml:"adminRoles"`
		AllowedClusters []string `yaml:"allowedClusters"` // empty: every cluster
	} `yaml:"tenants"`
	Namespaces []struct {
		Name                string   `yaml:"name"` // tenant/namespace
		ReplicationClusters []string `yaml:"replicationClusters"`
	} `yaml:"namespaces"`
}

// parseApplyFile decodes and checks a file, reporting every problem at once.
func parseApplyFile(raw []byte) (*applyFile, error) {
	var f applyFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	var errs []error
	for i, t := range f.Tenants {
		if err := parseName("tenant", t.Name); err != nil {
			errs = append(errs, fmt.Errorf("tenants[%d].name: %w", i, err))
		}
	}
	for i, n := range f.Namespaces {
		if _, err := parseNamespace(n.Name); err != nil {
			errs = append(errs, fmt.Errorf("namespaces[%d].name: %w", i, err))
		}
	}
	return &f, errors.Join(errs...)
}

// applyCmd is `isobar admin apply <file>`: makes the tenants and namespaces
// of a file, and sets what differs of those that exist (a tenant's admin
// roles and allowed clusters, a namespace's replication clusters); it
// deletes nothing. Until --wait passes, a request that gets no answer or
// a 5xx is tried again, so it can run while the brokers come up.
func (a *adminCmd) applyCmd() *cobra.Command {
	var wait time.Duration
	c := verb("apply <file>", "Create the tenants and namespaces of a YAML file, or bring them in line with it", func(cmd *cobra.Command, args []string) error {
		raw, err := os.ReadFile(args[0])
		if err != nil {
			return usageError{err}
		}
		f, err := parseApplyFile(raw)
		if err != nil {
			return usageError{fmt.Errorf("%s: %w", args[0], err)}
		}
		cl, err := a.client()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), wait)
		defer cancel()
		for _, t := range f.Tenants {
			op := "apply tenant " + t.Name
			if err := retryAdmin(ctx, op, func() error { return applyTenant(ctx, cl, t.Name, t.AdminRoles, t.AllowedClusters) }); err != nil {
				return err
			}
			done(cmd, "tenant %s", t.Name)
		}
		for _, n := range f.Namespaces {
			op := "apply namespace " + n.Name
			if err := retryAdmin(ctx, op, func() error { return applyNamespace(ctx, cl, n.Name, n.ReplicationClusters) }); err != nil {
				return err
			}
			done(cmd, "namespace %s", n.Name)
		}
		return nil
	})
	c.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to keep trying requests that get no answer or a 5xx")
	return c
}

func applyTenant(ctx context.Context, c pulsaradmin.Client, name string, roles, clusters []string) error {
	if roles == nil {
		roles = []string{}
	}
	if len(clusters) == 0 {
		all, err := c.Clusters().ListWithContext(ctx)
		if err != nil {
			return err
		}
		clusters = all
	}
	want := utils.TenantData{Name: name, AdminRoles: roles, AllowedClusters: clusters}
	err := c.Tenants().CreateWithContext(ctx, want)
	if status(err) != http.StatusConflict {
		return err
	}
	have, err := c.Tenants().GetWithContext(ctx, name)
	if err != nil {
		return err
	}
	if sameSet(have.AdminRoles, roles) && sameSet(have.AllowedClusters, clusters) {
		return nil
	}
	return c.Tenants().UpdateWithContext(ctx, want)
}

func applyNamespace(ctx context.Context, c pulsaradmin.Client, ns string, clusters []string) error {
	p := utils.NewDefaultPolicies()
	p.ReplicationClusters = clusters
	var err error
	if len(clusters) == 0 {
		err = c.Namespaces().CreateNamespaceWithContext(ctx, ns)
	} else {
		err = c.Namespaces().CreateNsWithPolicesWithContext(ctx, ns, *p)
	}
	if status(err) != http.StatusConflict {
		return err
	}
	if len(clusters) == 0 {
		return nil
	}
	have, err := c.Namespaces().GetNamespaceReplicationClustersWithContext(ctx, ns)
	if err != nil || sameSet(have, clusters) {
		return err
	}
	return c.Namespaces().SetNamespaceReplicationClustersWithContext(ctx, ns, clusters)
}

// retryAdmin calls f until it succeeds, fails with a 4xx, or ctx ends.
func retryAdmin(ctx context.Context, op string, f func() error) error {
	for {
		err := f()
		if s := status(err); err == nil || (s >= 400 && s < 500) {
			return adminErrOrNil(op, err)
		}
		select {
		case <-ctx.Done():
			return adminErr(op, err)
		case <-time.After(time.Second):
		}
	}
}

func adminErrOrNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return adminErr(op, err)
}

// status is the HTTP status of an admin API refusal, 0 for another error
// (or none).
func status(err error) int {
	var ae *adminError
	if errors.As(adminErr("", err), &ae) {
		return ae.Status
	}
	return 0
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
