package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// schemasCmd is `isobar admin schemas`, pulsar-admin's schemas noun
// (docs/schemas.md).
func (a *adminCmd) schemasCmd() *cobra.Command {
	cmd := group("schemas", "Read, upload, test and delete topics' schemas")
	var asJSON, force bool
	var version int64
	var file string
	get := readVerb("get <topic>", "Show a topic's schema (the latest, or --version N)", &asJSON, func(cmd *cobra.Command, args []string) error {
		t, err := parseTopic(args[0])
		if err != nil {
			return err
		}
		var info *utils.SchemaInfo
		v := version
		if err := a.do(cmd, "get the schema of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
			if v >= 0 {
				info, err = c.Schemas().GetSchemaInfoByVersion(t.String(), v)
				return err
			}
			// (Not GetSchemaInfoWithVersion: it prints its errors on
			// stdout.)
			all, err := c.Schemas().GetAllSchemas(t.String())
			if err != nil {
				return err
			}
			if len(all) == 0 {
				return rest.Error{Code: http.StatusNotFound, Reason: "Schema not found"}
			}
			info, v = all[len(all)-1].SchemaInfo, all[len(all)-1].Version
			return nil
		}); err != nil {
			return err
		}
		return showSchemas(cmd, asJSON, []*utils.SchemaInfoWithVersion{{Version: v, SchemaInfo: info}})
	})
	get.Flags().Int64Var(&version, "version", -1, "the version to show (default: the latest)")
	list := readVerb("list <topic>", "Show every version of a topic's schema since it was last deleted", &asJSON, func(cmd *cobra.Command, args []string) error {
		t, err := parseTopic(args[0])
		if err != nil {
			return err
		}
		var all []*utils.SchemaInfoWithVersion
		if err := a.do(cmd, "list the schemas of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
			all, err = c.Schemas().GetAllSchemas(t.String())
			return err
		}); err != nil {
			return err
		}
		return showSchemas(cmd, asJSON, all)
	})
	upload := verb("upload <topic>", "Add a version from a file {\"type\",\"schema\",\"properties\"} (as pulsar-admin)", func(cmd *cobra.Command, args []string) error {
		t, p, err := schemaFile(args[0], file)
		if err != nil {
			return err
		}
		if err := a.do(cmd, "upload a schema to "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
			return c.Schemas().CreateSchemaByPayload(t.String(), p)
		}); err != nil {
			return err
		}
		done(cmd, "uploaded a %s schema to %s", p.SchemaType, t)
		return nil
	})
	upload.Flags().StringVarP(&file, "filename", "f", "", "the schema file (required)")
	compat := readVerb("compatibility <topic>", "Test whether the schema in a file could be added (nothing is stored)", &asJSON, func(cmd *cobra.Command, args []string) error {
		t, p, err := schemaFile(args[0], file)
		if err != nil {
			return err
		}
		var res *utils.IsCompatibility
		if err := a.do(cmd, "test a schema against "+t.String(), func(ctx context.Context, c pulsaradmin.Client) (err error) {
			res, err = c.Schemas().TestCompatibilityWithPostSchemaPayload(t.String(), p)
			return err
		}); err != nil {
			return err
		}
		return show(cmd, asJSON, res, func(w io.Writer) {
			fmt.Fprintf(w, "compatible\t%v\nstrategy\t%s\n", res.IsCompatibility, res.SchemaCompatibilityStrategy)
		})
	})
	compat.Flags().StringVarP(&file, "filename", "f", "", "the schema file (required)")
	del := verb("delete <topic>", "Delete a topic's schema (--force: every version, numbering starts over)", func(cmd *cobra.Command, args []string) error {
		t, err := parseTopic(args[0])
		if err != nil {
			return err
		}
		if err := a.do(cmd, "delete the schema of "+t.String(), func(ctx context.Context, c pulsaradmin.Client) error {
			if force {
				return c.Schemas().ForceDeleteSchema(t.String())
			}
			return c.Schemas().DeleteSchema(t.String())
		}); err != nil {
			return err
		}
		done(cmd, "deleted the schema of %s", t)
		return nil
	})
	del.Flags().BoolVar(&force, "force", false, "remove every version instead of adding a deletion marker")
	cmd.AddCommand(get, list, upload, compat, del)
	return cmd
}

// schemaFile reads a pulsar-admin schema file; problems are usage errors.
func schemaFile(topicArg, file string) (utils.TopicName, utils.PostSchemaPayload, error) {
	var p utils.PostSchemaPayload
	t, err := parseTopic(topicArg)
	if err != nil {
		return t, p, err
	}
	if file == "" {
		return t, p, usageError{fmt.Errorf("--filename is required")}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return t, p, usageError{err}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return t, p, usageError{fmt.Errorf("%s: want {\"type\",\"schema\",\"properties\"}: %v", file, err)}
	}
	if p.SchemaType == "" {
		return t, p, usageError{fmt.Errorf("%s: no schema type", file)}
	}
	return t, p, nil
}

func showSchemas(cmd *cobra.Command, asJSON bool, all []*utils.SchemaInfoWithVersion) error {
	if all == nil {
		all = []*utils.SchemaInfoWithVersion{}
	}
	return show(cmd, asJSON, all, func(w io.Writer) {
		for _, s := range all {
			i := s.SchemaInfo
			fmt.Fprintf(w, "version\t%d\ntype\t%s\n", s.Version, i.Type)
			if i.Timestamp > 0 {
				fmt.Fprintf(w, "created\t%s\n", time.UnixMilli(i.Timestamp).UTC().Format(time.RFC3339))
			}
			keys := make([]string, 0, len(i.Properties))
			for k := range i.Properties {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "property\t%s=%s\n", k, i.Properties[k])
			}
			if len(i.Schema) > 0 {
				fmt.Fprintf(w, "schema\t%s\n", i.Schema)
			}
		}
	})
}
