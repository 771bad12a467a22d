// Package helm tests deploy/helm/isobar, the Helm chart of one Isobar
// region, without a Kubernetes cluster: helm lint --strict and helm
// template of the chart with each value set of isobar/ci, every rendered
// object decoded strictly into its Kubernetes API type (unknown fields
// are errors), the references between objects checked (selectors,
// ports, volumes, certificates), and each process's configuration file
// and environment loaded by Isobar's own configuration loader and
// validated as the process would. TestDockerRegions and
// TestDockerRegionsSecure (docker_test.go) run what the chart renders for
// two regions as containers under Docker and send messages between them.
//
// The tests need the helm binary: .bin/helm (scripts/install-helm.sh
// builds it) or the one ISOBAR_HELM names; without it they are skipped,
// saying so. The Docker tests also need Docker and a go test timeout of
// 15 minutes or more (go test -timeout 30m ./deploy/helm), and are
// skipped with -short or ISOBAR_SKIP_HELM_DOCKER=1.
package helm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/isobar-mq/isobar/internal/config"
	"github.com/isobar-mq/isobar/region"
)

// chartDir is the chart, relative to this package.
const chartDir = "isobar"

// valueSet is one of the chart's test value sets (isobar/ci) and what the
// test expects of its rendering.
type valueSet struct {
	file      string // under isobar/ci
	release   string
	region    string
	drain     int      // drainTimeoutSeconds
	existing  []string // Secrets the set names that the chart does not make
	tls       bool
	roles     []string // the workloads' components
	gateways  int      // NATS gateways to other regions
	globalURL string   // the global store endpoint the region's processes use
	monitors  bool     // PodMonitors rendered
}

var valueSets = []valueSet{
	{file: "plain.yaml", release: "us-east", region: "us-east", drain: 20,
		roles:     []string{"global", "metastore", "bookie", "broker", "proxy", "nats", "replicator"},
		globalURL: "http://us-east-global-0.us-east-global:2379", monitors: true},
	{file: "secure.yaml", release: "us-east", region: "us-east", drain: 20, tls: true,
		roles:     []string{"global", "metastore", "bookie", "broker", "proxy", "nats", "replicator"},
		globalURL: "https://us-east-global-0.us-east-global:2379", monitors: true},
	{file: "federated.yaml", release: "eu-west", region: "eu-west", drain: 45,
		existing: []string{"isobar-eu-west-tokens"}, gateways: 1,
		roles:     []string{"metastore", "bookie", "broker", "proxy", "nats", "replicator"},
		globalURL: "http://global.us-east.example.com:2379"},
}

// helmBin is the helm binary, or the test is skipped.
func helmBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ISOBAR_HELM"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", ".bin", "helm")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no helm: %s is not there (scripts/install-helm.sh builds it) and ISOBAR_HELM is not set", p)
	}
	return p
}

// helm runs helm with args and returns its stdout; stderr joins the error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	// No user's repositories, plugins or caches: only the chart here.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func TestLintStrict(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(strings.TrimSuffix(vs.file, ".yaml"), func(t *testing.T) {
			out, err := helm(t, "lint", "--strict", chartDir, "-f", filepath.Join(chartDir, "ci", vs.file))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Fatalf("helm lint --strict:\n%s", out)
			}
		})
	}
}

// TestTemplateRefused: values that cannot make a working region are
// refused when rendered, with a message naming the setting.
func TestTemplateRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"no region", nil, "region is required"},
		{"replicators without a global store", []string{"region=r"}, "replicator.enabled needs a global store"},
		{"a global store run here and another's", []string{"region=r", "globalStore.enabled=true", "globalStore.endpoints={http://g:2379}"}, "are exclusive"},
		{"a misspelt value", []string{"region=r", "bookie.replica=3"}, "additional properties 'replica' not allowed"},
		{"tls without issuers", []string{"region=r", "replicator.enabled=false", "tls.enabled=true"}, "tls.enabled needs tls.regionIssuer.name"},
		{"auth without a key", []string{"region=r", "replicator.enabled=false", "auth.enabled=true"}, "auth.secretKeyBase64"},
		{"ensemble larger than the bookies", []string{"region=r", "replicator.enabled=false", "bookie.replicas=2", "broker.ledger.ensembleSize=3"}, "ensembleSize is larger than bookie.replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "r", chartDir}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			_, err := helm(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template %v: want an error saying %q, got %v", tc.set, tc.want, err)
			}
		})
	}
}

func TestTemplate(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(strings.TrimSuffix(vs.file, ".yaml"), func(t *testing.T) {
			objs := render(t, vs)
			checkRendering(t, vs, objs)
		})
	}
}

// rendered is what one helm template gave, decoded.
type rendered struct {
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	services     map[string]*corev1.Service
	statefulSets map[string]*appsv1.StatefulSet
	deployments  map[string]*appsv1.Deployment
	pdbs         map[string]*policyv1.PodDisruptionBudget
	podMonitors  map[string]*podMonitor
	certificates map[string]*certificate
}

// podMonitor is the part of monitoring.coreos.com/v1 PodMonitor the
// chart renders: a custom resource, so there is no type in k8s.io/api;
// decoding into it with unknown fields refused still catches a field the
// chart renders by mistake.
type podMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   objectMeta        `json:"metadata"`
	Spec       podMonitorSpec    `json:"spec"`
	Status     map[string]string `json:"status,omitempty"`
}

type podMonitorSpec struct {
	Selector            labelSelector `json:"selector"`
	PodMetricsEndpoints []struct {
		Port     string `json:"port"`
		Path     string `json:"path"`
		Interval string `json:"interval"`
	} `json:"podMetricsEndpoints"`
}

type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type objectMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// certificate is the part of cert-manager.io/v1 Certificate the chart
// renders (a custom resource too).
type certificate struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		SecretName  string   `json:"secretName"`
		CommonName  string   `json:"commonName"`
		DNSNames    []string `json:"dnsNames"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		Usages    []string `json:"usages"`
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// render runs helm template with the value set and decodes every
// document strictly: duplicate keys and fields the type does not have
// are errors.
func render(t *testing.T, vs valueSet) *rendered {
	t.Helper()
	return renderFiles(t, vs.release, filepath.Join(chartDir, "ci", vs.file))
}

// renderFiles renders the chart as release with the values files given.
func renderFiles(t *testing.T, release string, values ...string) *rendered {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", "isobar"}
	for _, v := range values {
		args = append(args, "-f", v)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		services: map[string]*corev1.Service{}, statefulSets: map[string]*appsv1.StatefulSet{},
		deployments: map[string]*appsv1.Deployment{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		podMonitors: map[string]*podMonitor{}, certificates: map[string]*certificate{},
	}
	docs := regexp.MustCompile(`(?m)^---[ \t]*$`).Split(out, -1)
	n := 0
	for _, doc := range docs {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		n++
		js, err := sigsyaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Fatalf("document %d: %v\n%s", n, err, doc)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			t.Fatalf("document %d: %v", n, err)
		}
		name := head.Metadata.Name
		var dst any
		switch head.APIVersion + " " + head.Kind {
		case "v1 ConfigMap":
			dst = put(t, r.configMaps, name)
		case "v1 Secret":
			dst = put(t, r.secrets, name)
		case "v1 Service":
			dst = put(t, r.services, name)
		case "apps/v1 StatefulSet":
			dst = put(t, r.statefulSets, name)
		case "apps/v1 Deployment":
			dst = put(t, r.deployments, name)
		case "policy/v1 PodDisruptionBudget":
			dst = put(t, r.pdbs, name)
		case "monitoring.coreos.com/v1 PodMonitor":
			dst = put(t, r.podMonitors, name)
		case "cert-manager.io/v1 Certificate":
			dst = put(t, r.certificates, name)
		default:
			t.Fatalf("document %d: %s %s %q: a kind this test does not know", n, head.APIVersion, head.Kind, name)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			t.Fatalf("%s %q: %v", head.Kind, name, err)
		}
	}
	t.Logf("%s %v: %d objects", release, values, n)
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// put makes a new object under name in m, refusing a name rendered twice.
func put[T any](t *testing.T, m map[string]*T, name string) *T {
	t.Helper()
	if name == "" {
		t.Fatal("an object without a name")
	}
	if _, ok := m[name]; ok {
		t.Fatalf("%q rendered twice", name)
	}
	v := new(T)
	m[name] = v
	return v
}

// workload is a StatefulSet or Deployment's pod template, by name.
type workload struct {
	kind, name string
	replicas   int32
	selector   map[string]string
	pod        corev1.PodTemplateSpec
	claims     []string // volumeClaimTemplates
}

func (r *rendered) workloads() []workload {
	var w []workload
	for n, s := range r.statefulSets {
		var claims []string
		for _, c := range s.Spec.VolumeClaimTemplates {
			claims = append(claims, c.Name)
		}
		w = append(w, workload{"StatefulSet", n, *s.Spec.Replicas, s.Spec.Selector.MatchLabels, s.Spec.Template, claims})
	}
	for n, d := range r.deployments {
		w = append(w, workload{"Deployment", n, *d.Spec.Replicas, d.Spec.Selector.MatchLabels, d.Spec.Template, nil})
	}
	slices.SortFunc(w, func(a, b workload) int { return strings.Compare(a.name, b.name) })
	return w
}

// selects reports the workloads whose pods sel selects.
func (r *rendered) selects(sel map[string]string) []workload {
	if len(sel) == 0 {
		return nil
	}
	var out []workload
	for _, w := range r.workloads() {
		if labels.SelectorFromSet(sel).Matches(labels.Set(w.pod.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func checkRendering(t *testing.T, vs valueSet, r *rendered) {
	const preStop, margin = 5, 5
	secretNames := map[string]bool{}
	for n := range r.secrets {
		secretNames[n] = true
	}
	for _, c := range r.certificates {
		secretNames[c.Spec.SecretName] = true
	}
	for _, n := range vs.existing {
		secretNames[n] = true
	}

	var components []string
	for _, w := range r.workloads() {
		comp := w.pod.Labels["app.kubernetes.io/component"]
		components = append(components, comp)
		where := w.kind + " " + w.name
		if !labels.SelectorFromSet(w.selector).Matches(labels.Set(w.pod.Labels)) {
			t.Errorf("%s: its selector %v does not select its own pods %v", where, w.selector, w.pod.Labels)
		}
		if w.pod.Labels["isobar.io/region"] != vs.region {
			t.Errorf("%s: region label %q, want %q", where, w.pod.Labels["isobar.io/region"], vs.region)
		}
		ps := w.pod.Spec
		if g := ps.TerminationGracePeriodSeconds; g == nil || *g != int64(preStop+vs.drain+margin) {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want preStop %d + drain %d + margin %d", where, g, preStop, vs.drain, margin)
		}
		if sc := ps.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: pods may run as root", where)
		}
		volumes := map[string]bool{}
		for _, c := range w.claims {
			volumes[c] = true
		}
		for _, v := range ps.Volumes {
			volumes[v.Name] = true
			switch {
			case v.ConfigMap != nil:
				if r.configMaps[v.ConfigMap.Name] == nil {
					t.Errorf("%s: volume %s: ConfigMap %q is not rendered", where, v.Name, v.ConfigMap.Name)
				}
			case v.Secret != nil:
				if !secretNames[v.Secret.SecretName] {
					t.Errorf("%s: volume %s: Secret %q is neither rendered, nor a certificate's, nor named by the values", where, v.Name, v.Secret.SecretName)
				}
			case v.EmptyDir != nil:
			default:
				t.Errorf("%s: volume %s of a kind this test does not know", where, v.Name)
			}
		}
		if len(ps.Containers) != 1 || len(ps.InitContainers) != 0 {
			t.Fatalf("%s: %d containers, %d init containers; want one container", where, len(ps.Containers), len(ps.InitContainers))
		}
		c := ps.Containers[0]
		if c.Image != "isobar:dev" {
			t.Errorf("%s: image %q, want isobar:dev", where, c.Image)
		}
		if len(c.Args) != 3 || c.Args[1] != "--config" {
			t.Fatalf("%s: args %q, want [<role> --config <file>]", where, c.Args)
		}
		httpPort := false
		for _, p := range c.Ports {
			httpPort = httpPort || p.Name == "http"
		}
		if !httpPort {
			t.Errorf("%s: no container port named http (probes, PodMonitors)", where)
		}
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"startup", c.StartupProbe, "/healthz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
				t.Errorf("%s: %s probe %+v, want GET %s on port http", where, p.name, p.probe, p.path)
			}
		}
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != preStop {
			t.Errorf("%s: preStop %+v, want a %ds sleep before SIGTERM starts the drain", where, c.Lifecycle, preStop)
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s: mount %s of a volume that is not there", where, m.Name)
			}
		}
		checkProcessConfig(t, vs, r, where, comp, w)
	}
	slices.Sort(components)
	want := slices.Clone(vs.roles)
	slices.Sort(want)
	if !slices.Equal(components, want) {
		t.Errorf("workloads of components %v, want %v", components, want)
	}

	for n, s := range r.services {
		ws := r.selects(s.Spec.Selector)
		if len(ws) != 1 {
			t.Errorf("Service %s: selects the pods of %d workloads, want 1", n, len(ws))
			continue
		}
		for _, p := range s.Spec.Ports {
			if !hasPort(ws[0].pod.Spec.Containers[0], p.TargetPort.String()) {
				t.Errorf("Service %s: port %s targets %s, which %s's pods do not have", n, p.Name, p.TargetPort.String(), ws[0].name)
			}
		}
	}
	for n, p := range r.pdbs {
		if p.Spec.Selector == nil || len(r.selects(p.Spec.Selector.MatchLabels)) != 1 {
			t.Errorf("PodDisruptionBudget %s: does not select the pods of exactly one workload", n)
		}
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want 1", n, p.Spec.MaxUnavailable)
		}
	}
	for _, w := range r.workloads() {
		if w.replicas > 1 && len(r.selectsPDB(w)) != 1 {
			t.Errorf("%s %s: %d replicas and no PodDisruptionBudget", w.kind, w.name, w.replicas)
		}
	}
	if want := len(vs.roles); len(r.podMonitors) != want && (vs.monitors || len(r.podMonitors) != 0) {
		t.Errorf("%d PodMonitors, want one per role (%d) or none (podMonitors.enabled %v)", len(r.podMonitors), want, vs.monitors)
	}
	for n, m := range r.podMonitors {
		ws := r.selects(m.Spec.Selector.MatchLabels)
		if len(ws) != 1 {
			t.Errorf("PodMonitor %s: selects the pods of %d workloads, want 1", n, len(ws))
			continue
		}
		for _, e := range m.Spec.PodMetricsEndpoints {
			if e.Path != "/metrics" || !hasPort(ws[0].pod.Spec.Containers[0], e.Port) {
				t.Errorf("PodMonitor %s: endpoint %+v is not /metrics on a port of %s", n, e, ws[0].name)
			}
		}
	}
	if vs.tls != (len(r.certificates) > 0) {
		t.Errorf("%d Certificates with tls %v", len(r.certificates), vs.tls)
	}
	for n, c := range r.certificates {
		if c.Spec.IssuerRef.Name == "" || len(c.Spec.DNSNames) == 0 || c.Spec.SecretName == "" {
			t.Errorf("Certificate %s: issuer %q, %d DNS names, secret %q", n, c.Spec.IssuerRef.Name, len(c.Spec.DNSNames), c.Spec.SecretName)
		}
	}
}

func (r *rendered) selectsPDB(w workload) []string {
	var out []string
	for n, p := range r.pdbs {
		if labels.SelectorFromSet(p.Spec.Selector.MatchLabels).Matches(labels.Set(w.pod.Labels)) {
			out = append(out, n)
		}
	}
	return out
}

func hasPort(c corev1.Container, name string) bool {
	for _, p := range c.Ports {
		if p.Name == name || fmt.Sprint(p.ContainerPort) == name {
			return true
		}
	}
	return false
}

// checkProcessConfig loads the container's configuration file (from its
// ConfigMap) and environment with Isobar's configuration loader, as the
// process would (unknown keys and variables are errors), and validates
// the role's sections.
func checkProcessConfig(t *testing.T, vs valueSet, r *rendered, where, comp string, w workload) {
	t.Helper()
	c, replicas := w.pod.Spec.Containers[0], w.replicas
	role, file := c.Args[0], filepath.Base(c.Args[2])
	if !strings.HasPrefix(c.Args[2], "/etc/isobar/") {
		t.Errorf("%s: config %s is not under /etc/isobar", where, c.Args[2])
	}
	var data string
	for _, cm := range r.configMaps {
		if d, ok := cm.Data[file]; ok {
			data = d
		}
	}
	if data == "" {
		t.Fatalf("%s: no ConfigMap holds %s", where, file)
	}
	// The pod's Secrets as files under root, where the process would
	// find them under /: a certificate's Secret as cert-manager fills it
	// (tls.crt, tls.key, ca.crt), the tokens Secret as rendered or, when
	// the values name one, with the keys docs/kubernetes.md lists. The
	// roles' validation reads them, so a path in the configuration that
	// no mount provides is an error.
	root := t.TempDir()
	data = strings.ReplaceAll(data, "/secrets/", root+"/secrets/")
	vols := map[string]corev1.Volume{}
	for _, v := range w.pod.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v := vols[m.Name]
		if v.Secret == nil {
			continue
		}
		files := map[string][]byte{}
		if s := r.secrets[v.Secret.SecretName]; s != nil {
			files = s.Data
		} else if slices.Contains(vs.existing, v.Secret.SecretName) {
			for _, k := range []string{"secret.key", "proxy.token", "replicator.token"} {
				files[k] = []byte("x")
			}
		} else {
			crt, key := testCert()
			files = map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": crt}
		}
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, b := range files {
			if err := os.WriteFile(filepath.Join(dir, k), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	// The environment as the kubelet makes it, for pod 0 of the workload.
	podName := w.name + "-0"
	vals := map[string]string{}
	var environ []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = podName
			case "status.podIP":
				v = "10.1.2.3"
			default:
				t.Errorf("%s: env %s from %s", where, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		v = envRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			got, ok := vals[name]
			if !ok {
				t.Errorf("%s: env %s refers to $(%s), not defined before it", where, e.Name, name)
			}
			return got
		})
		vals[e.Name] = v
		environ = append(environ, e.Name+"="+v)
	}
	var f region.File
	if err := config.Load(path, &f, nil, environ); err != nil {
		t.Fatalf("%s: %v\n%s", where, err, data)
	}
	if f.ShutdownTimeout.Seconds() != float64(vs.drain) {
		t.Errorf("%s: shutdownTimeout %v, want %ds", where, f.ShutdownTimeout, vs.drain)
	}
	var errs []error
	switch role {
	case "metastore":
		e := f.Etcd.EmbedConfig
		errs = append(errs, e.Validate())
		if e.Name != podName || !strings.Contains(e.InitialCluster, podName+"=") {
			t.Errorf("%s: member %q is not in the initial cluster %q", where, e.Name, e.InitialCluster)
		}
		if n := strings.Count(e.InitialCluster, "="); n != int(replicas) {
			t.Errorf("%s: initial cluster of %d members, %d replicas", where, n, replicas)
		}
	case "bookie":
		if f.Bookie.Region != vs.region || !strings.HasPrefix(f.Bookie.AdvertiseAddr, podName+".") {
			t.Errorf("%s: bookie of region %q advertises %q", where, f.Bookie.Region, f.Bookie.AdvertiseAddr)
		}
		errs = append(errs, f.Metastore.Validate())
	case "broker":
		if f.Broker.Name == "" {
			f.Broker.Name = podName
		}
		errs = append(errs, f.Metastore.Validate(), f.Broker.Validate())
		if f.Broker.AdvertisedAddress != "10.1.2.3" {
			t.Errorf("%s: advertises %q, want the pod IP", where, f.Broker.AdvertisedAddress)
		}
		if !slices.Contains(f.Global.Endpoints, vs.globalURL) {
			t.Errorf("%s: global store %v, want %s among them", where, f.Global.Endpoints, vs.globalURL)
		}
	case "proxy":
		errs = append(errs, f.Metastore.Validate(), f.Proxy.Validate())
		if vs.tls && f.Proxy.TLS.CertFile == "" {
			t.Errorf("%s: TLS values and no TLS listener", where)
		}
	case "replicator":
		errs = append(errs, f.Metastore.Validate(), f.Global.Validate(), f.Replicator.Validate())
		if f.Replicator.ID != podName {
			t.Errorf("%s: worker id %q, want the pod's name", where, f.Replicator.ID)
		}
	case "nats":
		if f.NATS.Region != vs.region || len(f.NATS.Gateways) != vs.gateways || f.NATS.GatewayAdvertise == "" {
			t.Errorf("%s: NATS of region %q, gateways %v advertised as %q", where, f.NATS.Region, f.NATS.Gateways, f.NATS.GatewayAdvertise)
		}
	default:
		t.Errorf("%s: role %q", where, role)
	}
	if comp != role && !(comp == "global" && role == "metastore") {
		t.Errorf("%s: component %s runs isobar %s", where, comp, role)
	}
	for _, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
}

// testCert is a self-signed certificate and its key in PEM, made once.
var testCert = sync.OnceValues(func() ([]byte, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "helm-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
})
