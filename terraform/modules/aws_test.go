package modules_test

import (
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/terraform/internal/tofutest"
)

// TestAWSRegionModule checks terraform/modules/aws-region with OpenTofu:
// formatting, validation, and its tests (tests/*.tftest.hcl), which plan
// the module against a mocked AWS provider.
func TestAWSRegionModule(t *testing.T) {
	tf := awsTofu(t, "terraform/modules/aws-region")
	out := tf.Run(t, "test")
	awsCheckTestOutput(t, out)
}

// TestAWSFederationExample checks terraform/examples/aws-federation:
// formatting, validation, and its tests, which plan three regions with
// mocked AWS providers and the clusters, tenant and namespace with the
// real isobar provider (planning them reaches no server).
func TestAWSFederationExample(t *testing.T) {
	tf := awsTofu(t, "terraform/examples/aws-federation")
	out := tf.Run(t, "test")
	awsCheckTestOutput(t, out)
}

// awsTofu copies the terraform tree, checks the formatting of the module
// or example at src, and initialises and validates it. It skips the test
// under -short, without OpenTofu, or without the hashicorp/aws provider.
func awsTofu(t *testing.T, src string) *tofutest.Tofu {
	t.Helper()
	if testing.Short() {
		t.Skip("runs OpenTofu with the hashicorp/aws provider (slow to load); skipped with -short")
	}
	dir := tofutest.CopyDir(t, src)
	tf := tofutest.New(t, dir)
	if !tofutest.HasAWSProvider(t) {
		t.Skip("the hashicorp/aws provider cannot be downloaded here; put it under /opt/tf-plugins or set AWS_PROVIDER_DIR")
	}
	tf.Run(t, "fmt", "-check", "-recursive", "-diff", "-no-color")
	tf.Run(t, "init", "-backend=false", "-input=false")
	tf.Run(t, "validate")
	return tf
}

// awsCheckTestOutput fails the test unless `tofu test` ran something and
// reported no failure (it exits non-zero on a failure, which Run reports;
// this also catches a run of no tests at all).
func awsCheckTestOutput(t *testing.T, out string) {
	t.Helper()
	if !strings.Contains(out, "Success!") || !strings.Contains(out, " 0 failed") || strings.Contains(out, "Success! 0 passed") {
		t.Fatalf("tofu test did not pass:\n%s", out)
	}
	t.Logf("tofu test:\n%s", out)
}
