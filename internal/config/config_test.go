package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type section struct {
	Dir      string        `yaml:"dir"`
	Port     int           `yaml:"port"`
	Ratio    float64       `yaml:"ratio"`
	Wait     time.Duration `yaml:"wait"`
	On       bool          `yaml:"on"`
	Hosts    []string      `yaml:"hosts"`
	Internal string        `yaml:"-"`
}

type file struct {
	Name string  `yaml:"name"`
	Sec  section `yaml:"sec"`
}

func write(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedence(t *testing.T) {
	cfg := file{Name: "default", Sec: section{Port: 1, Dir: "d0", Wait: time.Second}}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.StringVar(&cfg.Sec.Dir, "dir", cfg.Sec.Dir, "")
	fs.IntVar(&cfg.Sec.Port, "port", cfg.Sec.Port, "")
	fs.StringSliceVar(&cfg.Sec.Hosts, "hosts", nil, "")
	if err := fs.Parse([]string{"--port=9", "--hosts=x,y"}); err != nil {
		t.Fatal(err)
	}
	p := write(t, "name: file\nsec:\n  dir: d1\n  port: 5\n  ratio: 0.5\n  hosts: [a]\n")
	env := []string{"ISOBAR_SEC_DIR=d2", "ISOBAR_SEC_WAIT=3s", "ISOBAR_SEC_ON=true", "OTHER=1"}
	if err := Load(p, &cfg, fs, env); err != nil {
		t.Fatal(err)
	}
	want := file{Name: "file", Sec: section{Dir: "d2", Port: 9, Ratio: 0.5, Wait: 3 * time.Second, On: true, Hosts: []string{"x", "y"}}}
	if cfg.Name != want.Name || cfg.Sec.Dir != want.Sec.Dir || cfg.Sec.Port != 9 || cfg.Sec.Ratio != 0.5 ||
		cfg.Sec.Wait != want.Sec.Wait || !cfg.Sec.On || strings.Join(cfg.Sec.Hosts, ",") != "x,y" {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
}

func TestErrors(t *testing.T) {
	var cfg file
	if err := Load(write(t, "sec:\n  nosuch: 1\n"), &cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("unknown key: %v", err)
	}
	if err := Load(write(t, "sec: [1, 2\n"), &cfg, nil, nil); err == nil {
		t.Error("bad yaml accepted")
	}
	if err := Load(filepath.Join(t.TempDir(), "missing.yaml"), &cfg, nil, nil); err == nil {
		t.Error("missing file accepted")
	}
	err := Load("", &cfg, nil, []string{"ISOBAR_SEC_PORT=abc", "ISOBAR_SEC_WAIT=forever"})
	if err == nil || !strings.Contains(err.Error(), "ISOBAR_SEC_PORT") || !strings.Contains(err.Error(), "ISOBAR_SEC_WAIT") {
		t.Errorf("bad env values should both be reported: %v", err)
	}
	if err := Load(write(t, ""), &cfg, nil, nil); err != nil {
		t.Errorf("empty file: %v", err)
	}
}

type Inner struct {
	Dir string `yaml:"dir"`
}

type withInline struct {
	Inner    `yaml:",inline"`
	Addr     string            `yaml:"addr"`
	Gateways map[string]string `yaml:"gateways"`
}

type inlineFile struct {
	Role withInline `yaml:"role"`
}

// Inline structs belong to their section (in YAML and in the
// environment), maps take key=value lists, and an environment variable of
// a known section that names no setting is refused, as an unknown key is.
func TestInlineMapsAndUnknownEnv(t *testing.T) {
	var cfg inlineFile
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.StringToStringVar(&cfg.Role.Gateways, "gateways", nil, "")
	if err := fs.Parse([]string{"--gateways=b=nats://h:2"}); err != nil {
		t.Fatal(err)
	}
	p := write(t, "role:\n  dir: d1\n  addr: a1\n  gateways: {a: 'nats://h:1'}\n")
	if err := Load(p, &cfg, fs, []string{"ISOBAR_ROLE_DIR=d2", "ISOBAR_OTHER_THING=ignored"}); err != nil {
		t.Fatal(err)
	}
	// A map flag adds to (or overrides keys of) the file's map.
	if cfg.Role.Dir != "d2" || cfg.Role.Addr != "a1" || len(cfg.Role.Gateways) != 2 || cfg.Role.Gateways["b"] != "nats://h:2" {
		t.Fatalf("got %+v", cfg.Role)
	}
	cfg = inlineFile{}
	if err := Load("", &cfg, nil, []string{"ISOBAR_ROLE_GATEWAYS=a=nats://h:1,b=nats://h:2"}); err != nil || len(cfg.Role.Gateways) != 2 {
		t.Fatalf("map from env: %+v, %v", cfg.Role.Gateways, err)
	}
	err := Load("", &cfg, nil, []string{"ISOBAR_ROLE_NOSUCH=1", "ISOBAR_ROLE_GATEWAYS=novalue"})
	if err == nil || !strings.Contains(err.Error(), "ISOBAR_ROLE_GATEWAYS") {
		t.Errorf("bad map value: %v", err)
	}
	err = Load("", &cfg, nil, []string{"ISOBAR_ROLE_NOSUCH=1"})
	if err == nil || !strings.Contains(err.Error(), "ISOBAR_ROLE_NOSUCH") {
		t.Errorf("unknown variable: %v", err)
	}
	if err := Load(write(t, "role:\n  nosuch: 1\n"), &cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("unknown key in an inline section: %v", err)
	}
}
