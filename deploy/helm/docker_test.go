package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// dockerBudget is what TestDockerRegions needs of the go test deadline:
// the image and pulsarcheck builds (minutes from a cold cache) and two
// regions' 15 containers up on a busy 2-core machine.
const dockerBudget = 15 * time.Minute

// TestDockerRegions runs what the chart renders for two regions — us-east
// with the global store, eu-west pointed at it — as containers: each pod
// of each rendered workload is one container of the isobar image built
// here (scripts/build-image.sh), with the container's args and
// environment (the pod's name and IP filled in as the kubelet does), its
// ConfigMaps and Secrets written out as files and mounted where the pod
// mounts them, a volume for each emptyDir and volume claim, a read-only
// root file system, no capabilities and the pod's user, restarted when it
// exits (restartPolicy Always). The pods' DNS names are network
// aliases: every Service's name on the pods it selects, and
// <pod>.<service> for StatefulSet pods. It waits for every container's
// readiness probe, applies tenants and namespaces through us-east's
// proxy (as docs/kubernetes.md does), checks with pulsarcheck
// (deploy/compose/pulsarcheck, the real Pulsar Go client) that messages
// cross between the regions exactly once and in order, both ways, through
// the proxies, and that a broker stopped with its pod's grace period
// drains and exits cleanly within it.
//
// Skipped with -short, with ISOBAR_SKIP_HELM_DOCKER set, without helm or
// Docker, and when the go test deadline leaves less than dockerBudget.
func TestDockerRegions(t *testing.T) { dockerRegions(t, false) }

// TestDockerRegionsSecure is TestDockerRegions with TLS and tokens: the
// chart's cert-manager Certificates are issued here as cert-manager
// would issue them (a Secret with tls.crt, tls.key and ca.crt, for the
// Certificate's DNS names, from the CA of the issuer it names: each
// region's, or the federation's), from CAs and tokens that `isobar
// secrets create` makes (internal/secrets); the tokens reach the chart
// as values. Clients then use the proxies' TLS ports with a token, from
// a container on the network that reaches them by their Services' names.
func TestDockerRegionsSecure(t *testing.T) { dockerRegions(t, true) }

func dockerRegions(t *testing.T, secure bool) {
	if testing.Short() {
		t.Skip("slow (minutes): skipped with -short")
	}
	if os.Getenv("ISOBAR_SKIP_HELM_DOCKER") != "" {
		t.Skip("ISOBAR_SKIP_HELM_DOCKER is set")
	}
	helmBin(t)
	if d, ok := t.Deadline(); ok && time.Until(d) < dockerBudget {
		t.Skipf("needs up to %v and the go test deadline leaves %v: run go test -timeout 30m ./deploy/helm", dockerBudget, time.Until(d).Round(time.Second))
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not on PATH")
	}
	if out, err := run(30*time.Second, nil, "docker", "info", "--format", "{{.ServerVersion}}"); err != nil {
		t.Skipf("the Docker daemon does not answer: %v: %s", err, strings.TrimSpace(out))
	}
	start := time.Now()
	d := &dockerRun{t: t, prefix: fmt.Sprintf("isobar-helm-%d", os.Getpid())}
	if secure {
		d.prefix += "-s"
	}
	d.image = "isobar:helm-test-" + strconv.Itoa(os.Getpid())
	d.build()
	d.network()

	// Small regions: one member per store, two bookies (E=Qw=Qa=2), one
	// pod of each other role.
	small := `
metastore: {replicas: 1}
bookie: {replicas: 2}
broker: {replicas: 1}
proxy: {replicas: 1}
replicator: {replicas: 1}
podMonitors: {enabled: false}
`
	eastExtra, westExtra, globalURL := "", "", "http://us-east-global-client:2379"
	if secure {
		eastExtra, westExtra = d.secrets()
		globalURL = "https://us-east-global-client:2379"
	}
	east := d.renderWith(valueSet{file: "plain.yaml", release: "us-east", region: "us-east"}, small+eastExtra+`
globalStore: {replicas: 1}
nats:
  gatewayAdvertise: us-east-nats-gateway:7222
  gateways: {eu-west: "nats://eu-west-nats-gateway:7222"}
`)
	west := d.renderWith(valueSet{file: "plain.yaml", release: "eu-west", region: "eu-west"}, small+westExtra+`
region: eu-west
globalStore: {enabled: false, endpoints: ["`+globalURL+`"]}
nats:
  gatewayAdvertise: eu-west-nats-gateway:7222
  gateways: {us-east: "nats://us-east-nats-gateway:7222"}
`)
	if secure {
		d.issue(east, "us-east")
		d.issue(west, "eu-west")
	}
	d.start(east)
	d.start(west)
	d.waitReady(5 * time.Minute)
	t.Logf("%d containers ready after %v", len(d.pods), time.Since(start).Round(time.Second))

	d.applyInit()
	if secure {
		d.secureMessages()
	} else {
		d.messages()
	}
	d.stopDrains("us-east-broker-0")
	t.Logf("wall time %v", time.Since(start).Round(time.Second))
}

// messages checks with pulsarcheck, on the host, through the proxies'
// plaintext ports, that messages cross between the regions exactly once
// and in order, both ways.
func (d *dockerRun) messages() {
	t := d.t
	proxyEast, proxyWest := d.podIP("us-east-proxy-0"), d.podIP("eu-west-proxy-0")
	d.poll(2*time.Minute, "both clusters listed by eu-west's proxy", func() (bool, string) {
		body, err := httpGet("http://" + net.JoinHostPort(proxyWest, "8080") + "/admin/v2/clusters")
		return err == nil && strings.Contains(body, "us-east") && strings.Contains(body, "eu-west"), fmt.Sprint(body, err)
	})
	for round := 1; round <= 2; round++ {
		out, err := run(3*time.Minute, nil, d.pulsarcheck, "-region", "us-east=pulsar://"+net.JoinHostPort(proxyEast, "6650"),
			"-region", "eu-west=pulsar://"+net.JoinHostPort(proxyWest, "6650"), "-namespace", "geo/replicated",
			"-round", strconv.Itoa(round), "-n", "20")
		if err != nil {
			d.diagnose()
			t.Fatalf("pulsarcheck round %d: %v\n%s", round, err, out)
		}
		t.Logf("pulsarcheck round %d:\n%s", round, strings.TrimSpace(out))
	}
}

// dockerRun is one run of TestDockerRegions: its image, network and
// containers, removed at the end.
type dockerRun struct {
	t           *testing.T
	prefix      string // of the network's and containers' names
	image       string
	pulsarcheck string
	net         string
	subnet      netip.Prefix
	nextIP      netip.Addr
	dir         string // ConfigMaps and Secrets written out
	pods        []pod
	secretsDir  string                       // secure: what `isobar secrets create` makes
	issued      map[string]map[string][]byte // secure: the Certificates' Secrets, by name
}

type pod struct {
	name, container, ip string
	grace               int64
	c                   corev1.Container
}

func run(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// build makes the image (scripts/build-image.sh, under a tag of this
// run) and pulsarcheck for the host.
func (d *dockerRun) build() {
	t := d.t
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := run(15*time.Minute, []string{"IMAGE=" + d.image}, "bash", filepath.Join(root, "scripts/build-image.sh"))
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("no Docker to build the image with: %s", out)
	} else if err != nil {
		t.Fatalf("scripts/build-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { run(time.Minute, nil, "docker", "image", "rm", d.image) })
	d.dir = t.TempDir()
	d.pulsarcheck = filepath.Join(d.dir, "pulsarcheck")
	cmd := exec.Command("go", "build", "-trimpath", "-o", d.pulsarcheck, "./deploy/compose/pulsarcheck")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building pulsarcheck: %v\n%s", err, out)
	}
	t.Logf("image %s and pulsarcheck built in %v", d.image, time.Since(start).Round(time.Second))
}

// network makes the run's network with a subnet of its own (docker run
// --ip needs one), trying a few until one is free.
func (d *dockerRun) network() {
	t := d.t
	d.net = d.prefix
	var errs []string
	for i := range 20 {
		p := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 200+(os.Getpid()+i)%50, (os.Getpid()/50+i*7)%250))
		out, err := run(time.Minute, nil, "docker", "network", "create", "--subnet", p.String(), d.net)
		if err == nil {
			d.subnet, d.nextIP = p, p.Addr().Next().Next().Next().Next() // .4: past the gateway
			t.Cleanup(func() {
				for _, p := range d.pods {
					run(time.Minute, nil, "docker", "rm", "-fv", p.container)
				}
				run(time.Minute, nil, "docker", "network", "rm", d.net)
			})
			return
		}
		errs = append(errs, strings.TrimSpace(out))
	}
	t.Fatalf("docker network create: no free subnet: %s", strings.Join(errs, "; "))
}

// renderWith renders the chart with the value set and extra values.
func (d *dockerRun) renderWith(vs valueSet, extra string) *rendered {
	f := filepath.Join(d.t.TempDir(), vs.release+".yaml")
	if err := os.WriteFile(f, []byte(extra), 0o644); err != nil {
		d.t.Fatal(err)
	}
	return renderFiles(d.t, vs.release, filepath.Join(chartDir, "ci", vs.file), f)
}

// start runs every pod of every workload of r.
func (d *dockerRun) start(r *rendered) {
	t := d.t
	for _, w := range r.workloads() {
		for i := range w.replicas {
			name := fmt.Sprintf("%s-%d", w.name, i)
			aliases := []string{name}
			for sn, s := range r.services {
				if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(w.pod.Labels)) {
					aliases = append(aliases, sn)
				}
			}
			if s := r.statefulSets[w.name]; s != nil {
				aliases = append(aliases, name+"."+s.Spec.ServiceName)
			}
			d.startPod(r, w, name, aliases)
		}
	}
	t.Logf("started %d containers", len(d.pods))
}

func (d *dockerRun) startPod(r *rendered, w workload, name string, aliases []string) {
	t := d.t
	c := w.pod.Spec.Containers[0]
	if c.Image != "isobar:dev" {
		t.Fatalf("%s: image %s", name, c.Image)
	}
	ip := d.nextIP
	d.nextIP = ip.Next()
	p := pod{name: name, container: d.prefix + "-" + name, ip: ip.String(), grace: *w.pod.Spec.TerminationGracePeriodSeconds, c: c}
	args := []string{"run", "-d", "--name", p.container, "--hostname", name,
		"--network", d.net, "--ip", p.ip, "--restart", "unless-stopped",
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--user", fmt.Sprintf("%d:%d", *w.pod.Spec.SecurityContext.RunAsUser, *w.pod.Spec.SecurityContext.RunAsGroup),
		"--stop-timeout", strconv.FormatInt(p.grace, 10)}
	for _, a := range aliases {
		args = append(args, "--network-alias", a)
	}
	vals := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = name
			case "status.podIP":
				v = p.ip
			default:
				t.Fatalf("%s: env %s from %s", name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		v = envRef.ReplaceAllStringFunc(v, func(ref string) string { return vals[envRef.FindStringSubmatch(ref)[1]] })
		vals[e.Name] = v
		args = append(args, "--env", e.Name+"="+v)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range w.pod.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		switch {
		case !ok || v.EmptyDir != nil: // a volume claim or an emptyDir
			args = append(args, "--mount", "type=volume,dst="+m.MountPath)
		case v.ConfigMap != nil:
			args = append(args, "--mount", "type=bind,readonly,src="+d.files(name+"-"+m.Name, r.configMaps[v.ConfigMap.Name].Data, nil)+",dst="+m.MountPath)
		case v.Secret != nil:
			data := d.issued[v.Secret.SecretName]
			if s := r.secrets[v.Secret.SecretName]; s != nil {
				data = s.Data
			}
			if data == nil {
				t.Fatalf("%s: Secret %s is neither rendered nor issued", name, v.Secret.SecretName)
			}
			args = append(args, "--mount", "type=bind,readonly,src="+d.files(name+"-"+m.Name, nil, data)+",dst="+m.MountPath)
		default:
			t.Fatalf("%s: volume %s of a kind this test does not run", name, m.Name)
		}
	}
	args = append(args, d.image)
	args = append(args, c.Args...)
	if out, err := run(time.Minute, nil, "docker", args...); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	d.pods = append(d.pods, p)
}

// files writes a ConfigMap's or Secret's data into a directory of its own.
func (d *dockerRun) files(name string, text map[string]string, bin map[string][]byte) string {
	dir := filepath.Join(d.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		d.t.Fatal(err)
	}
	all := map[string][]byte{}
	for k, v := range bin {
		all[k] = v
	}
	for k, v := range text {
		all[k] = []byte(v)
	}
	for k, v := range all {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o644); err != nil {
			d.t.Fatal(err)
		}
	}
	return dir
}

func (d *dockerRun) podIP(name string) string {
	for _, p := range d.pods {
		if p.name == name {
			return p.ip
		}
	}
	d.t.Fatalf("no pod %s", name)
	return ""
}

// probeURL is the pod's readiness probe as a URL on its IP.
func (p pod) probeURL() string {
	g := p.c.ReadinessProbe.HTTPGet
	port := g.Port.String()
	for _, cp := range p.c.Ports {
		if cp.Name == port {
			port = strconv.Itoa(int(cp.ContainerPort))
		}
	}
	return "http://" + net.JoinHostPort(p.ip, port) + g.Path
}

var probeClient = &http.Client{Timeout: 5 * time.Second}

func httpGet(url string) (string, error) {
	resp, err := probeClient.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode/100 != 2 {
		return b.String(), fmt.Errorf("%s: %s", url, resp.Status)
	}
	return b.String(), nil
}

// waitReady waits until every pod's readiness probe answers 2xx.
func (d *dockerRun) waitReady(timeout time.Duration) {
	d.poll(timeout, "every pod ready", func() (bool, string) {
		var waiting []string
		for _, p := range d.pods {
			if _, err := httpGet(p.probeURL()); err != nil {
				waiting = append(waiting, fmt.Sprintf("%s (%v)", p.name, err))
			}
		}
		return len(waiting) == 0, strings.Join(waiting, "; ")
	})
}

func (d *dockerRun) poll(timeout time.Duration, what string, f func() (bool, string)) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			d.diagnose()
			d.t.Fatalf("not %s after %v: %s", what, timeout, state)
		}
		time.Sleep(2 * time.Second)
	}
}

// applyInit makes tenant geo and namespace geo/replicated (both regions)
// through us-east's proxy with `isobar admin apply`, in a container of
// the image on the run's network, as docs/kubernetes.md does.
func (d *dockerRun) applyInit() {
	init := d.files("init", map[string]string{"init.yaml": "tenants:\n  - {name: geo, allowedClusters: [us-east, eu-west]}\nnamespaces:\n  - {name: geo/replicated, replicationClusters: [us-east, eu-west]}\n"}, nil)
	args := []string{"run", "--rm", "--network", d.net, "--read-only", "--mount", "type=bind,readonly,src=" + init + ",dst=/etc/isobar"}
	if d.secretsDir == "" {
		args = append(args, "--env", "ISOBAR_ADMIN_URL=http://us-east-proxy:8080")
	} else {
		// Over the proxy's TLS port, as the superuser.
		args = append(args, "--env", "ISOBAR_ADMIN_URL=https://us-east-proxy:8443",
			"--env", "ISOBAR_TLS_TRUST_CERTS_FILE=/secrets/ca.pem", "--env", "ISOBAR_TOKEN_FILE=/secrets/superuser.token",
			"--mount", "type=bind,readonly,src="+d.secretsDir+",dst=/secrets")
	}
	args = append(args, d.image, "admin", "apply", "/etc/isobar/init.yaml")
	d.poll(2*time.Minute, "tenants and namespaces applied", func() (bool, string) {
		out, err := run(time.Minute, nil, "docker", args...)
		return err == nil, fmt.Sprint(err, ": ", strings.TrimSpace(out))
	})
}

// stopDrains stops a pod's container as the kubelet would after its
// preStop pause (SIGTERM, SIGKILL after the grace period), and checks
// that the process drained and exited by itself, 0, within the drain.
func (d *dockerRun) stopDrains(name string) {
	t := d.t
	for _, p := range d.pods {
		if p.name != name {
			continue
		}
		st := time.Now()
		if out, err := run(2*time.Minute, nil, "docker", "stop", "--time", strconv.FormatInt(p.grace, 10), p.container); err != nil {
			t.Fatalf("docker stop %s: %v\n%s", p.container, err, out)
		}
		took := time.Since(st)
		out, err := run(time.Minute, nil, "docker", "inspect", "--format", "{{json .State}}", p.container)
		if err != nil {
			t.Fatalf("docker inspect: %v\n%s", err, out)
		}
		var st2 struct{ ExitCode int }
		if err := json.Unmarshal([]byte(out), &st2); err != nil {
			t.Fatal(err)
		}
		if st2.ExitCode != 0 || took > time.Duration(p.grace)*time.Second {
			d.logs(p)
			t.Fatalf("%s stopped in %v with exit status %d; want a drain that exits 0 within the grace period (%ds)", name, took.Round(time.Millisecond), st2.ExitCode, p.grace)
		}
		t.Logf("%s drained and exited 0 in %v (grace %ds)", name, took.Round(time.Millisecond), p.grace)
		return
	}
	t.Fatalf("no pod %s", name)
}

func (d *dockerRun) diagnose() {
	for _, p := range d.pods {
		if _, err := httpGet(p.probeURL()); err != nil {
			d.logs(p)
		}
	}
}

func (d *dockerRun) logs(p pod) {
	out, _ := run(time.Minute, nil, "docker", "logs", "--tail", "40", p.container)
	d.t.Logf("---- %s (%s) ----\n%s", p.name, p.ip, out)
}
