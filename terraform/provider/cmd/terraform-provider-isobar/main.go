// Command terraform-provider-isobar is the Isobar provider as the plugin
// binary Terraform and OpenTofu run (terraform/README.md shows how to
// install it). With -debug it serves for a debugger instead and prints
// the TF_REATTACH_PROVIDERS value to use.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/isobar-mq/isobar/terraform/provider"
)

// version is set at build time (-ldflags "-X main.version=v0.1.0").
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "serve for a debugger (prints TF_REATTACH_PROVIDERS)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.opentofu.org/isobar-mq/isobar",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
