// Package modules_test checks the Terraform modules under terraform/modules
// with the real OpenTofu: formatting, validation and each module's own
// `tofu test` suite.
package modules_test

import (
	"testing"

	"github.com/isobar-mq/isobar/terraform/internal/tofutest"
)

// TestRegionConfigModule runs the region-config module's tofu test suite
// (tests/render.tftest.hcl: the rendered configurations, units and
// cloud-init, and the inputs it refuses) after `tofu fmt -check` and
// `tofu validate`. The module has no provider, so it runs anywhere tofu
// does. terraform/examples' TestLocalFederation boots regions from its
// output.
func TestRegionConfigModule(t *testing.T) {
	if testing.Short() {
		t.Skip("OpenTofu module test: skipped with -short")
	}
	tf := tofutest.New(t, tofutest.CopyDir(t, "terraform/modules/region-config"))
	tf.Run(t, "fmt", "-check", "-recursive", "-diff")
	tf.Run(t, "init", "-input=false", "-backend=false")
	tf.Run(t, "validate")
	out := tf.Run(t, "test")
	t.Log(out)
}
