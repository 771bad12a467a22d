#!/usr/bin/env bash
# Makes OpenTofu install providers offline: builds the Isobar provider
# (terraform/provider) into a filesystem mirror under .bin/tofu-plugins,
# adds the hashicorp/aws provider to it where this machine carries one
# (under /opt/tf-plugins or ~/.terraform.d/plugins, in either registry's
# layout; AWS_PROVIDER_DIR names another), and writes .bin/tofurc, a CLI
# configuration that installs only from that mirror. Then, from any
# module or example of terraform/:
#
#   export TF_CLI_CONFIG_FILE=$PWD/.bin/tofurc   # in the repository's root
#   tofu init && tofu apply
#
# Safe to run concurrently (each file is renamed into place). Prints the
# CLI configuration's path (last line of stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.1.0
root="$PWD/.bin/tofu-plugins"
host=registry.opentofu.org
dir="$root/$host/isobar-mq/isobar/$version/linux_amd64"
mkdir -p "$dir"
tmp="$dir/.tmp.$$"
trap 'rm -f "$tmp" "$PWD/.bin/tofurc.$$"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$version" -o "$tmp" ./terraform/provider/cmd/terraform-provider-isobar
mv "$tmp" "$dir/terraform-provider-isobar_v$version"

# OpenTofu reads "hashicorp/aws" as registry.opentofu.org/hashicorp/aws;
# images often carry it in registry.terraform.io's layout: link either.
aws=""
for d in ${AWS_PROVIDER_DIR:-} /opt/tf-plugins "$HOME/.terraform.d/plugins"; do
	for h in registry.opentofu.org registry.terraform.io; do
		if [ -d "$d/$h/hashicorp/aws" ]; then
			aws="$d/$h/hashicorp/aws"
			break 2
		fi
	done
done
# OpenTofu's mirror search does not follow a symlink above a package's
# platform directory (<version>/<os_arch>), so each of those is linked.
if [ -n "$aws" ]; then
	if [ -L "$root/$host/hashicorp/aws" ]; then
		rm -f "$root/$host/hashicorp/aws" # an older layout: one link for the whole provider
	fi
	for p in "$aws"/*/*/; do
		p=${p%/}
		rel=${p#"$aws"/}
		mkdir -p "$root/$host/hashicorp/aws/$(dirname "$rel")"
		ln -sfn "$p" "$root/$host/hashicorp/aws/$rel.$$"
		mv -T "$root/$host/hashicorp/aws/$rel.$$" "$root/$host/hashicorp/aws/$rel"
	done
fi

cat > "$PWD/.bin/tofurc.$$" <<RC
# Written by scripts/tofu-mirror.sh: providers come only from the mirror.
disable_checkpoint = true
provider_installation {
  filesystem_mirror {
    path = "$root"
  }
}
RC
mv "$PWD/.bin/tofurc.$$" "$PWD/.bin/tofurc"
echo "$PWD/.bin/tofurc"
