#!/usr/bin/env bash
# Builds the Debian package target/debian/ibfabric_<version>_<arch>.deb:
# the release binary, the OpenSM plugin and its tools (built against the
# OpenSM installed here, as OpenSM requires), the systemd units, the
# example configs as conffiles, man pages, shell completions, the udev
# rule for the agent's discovery and an opensm.conf snippet.
# Usage: scripts/build-deb.sh [--binary PATH]   (default: cargo build --release)
# Needs what scripts/install-deps.sh installs (libopensm-dev, gcc, make).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=""
if [ "${1:-}" = "--binary" ]; then
  BIN=${2:?--binary needs a path}
fi
cd "$ROOT"
if [ -z "$BIN" ]; then
  echo "build-deb: cargo build --release (about 5-8 minutes on a fresh clone)" >&2
  cargo build --release --quiet --bin ibfabric
  BIN=target/release/ibfabric
fi
VERSION=$("$BIN" --version | awk '{print $2}')
ARCH=$(dpkg --print-architecture)
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
OUT=target/debian
STAGE=$OUT/ibfabric_${VERSION}_${ARCH}
rm -rf "$STAGE"
mkdir -p "$STAGE/DEBIAN"

echo "build-deb: the OpenSM plugin" >&2
make -s -C opensm-plugin OUT="$ROOT/$OUT/plugin" all >/dev/null
P=$OUT/plugin
install -D -m 0755 "$BIN" "$STAGE/usr/bin/ibfabric"
for t in ibfabric-pathrecord-sl ibfabric-sl2vl-read ibfabric-mcast-join; do
  install -D -m 0755 "$P/$t" "$STAGE/usr/bin/$t"
done
install -D -m 0644 "$P/libibfabric.so" "$STAGE/usr/lib/$MULTIARCH/libibfabric.so"
strip --strip-unneeded "$STAGE/usr/bin/"* "$STAGE/usr/lib/$MULTIARCH/libibfabric.so"

for u in deploy/systemd/*.service; do
  install -D -m 0644 "$u" "$STAGE/lib/systemd/system/$(basename "$u")"
done
for c in deploy/config/*.toml; do
  install -D -m 0644 "$c" "$STAGE/etc/ibfabric/$(basename "$c")"
done
install -D -m 0644 deploy/debian/60-ibfabric-umad.rules "$STAGE/lib/udev/rules.d/60-ibfabric-umad.rules"

DOC=$STAGE/usr/share/doc/ibfabric
install -D -m 0644 deploy/debian/copyright "$DOC/copyright"
install -D -m 0644 deploy/debian/opensm-ibfabric.conf "$DOC/examples/opensm-ibfabric.conf"
install -D -m 0644 deploy/README.md "$DOC/deploy/README.md"
install -D -m 0644 deploy/prometheus/ibfabric.rules.yml "$DOC/examples/prometheus/ibfabric.rules.yml"
install -D -m 0644 opensm-plugin/README.md "$DOC/opensm-plugin.md"
for d in README.md CHANGELOG.md docs/multicast.md docs/table-set-format.md; do
  install -D -m 0644 "$d" "$DOC/$(basename "$d")"
done
gzip -9n "$DOC/CHANGELOG.md"

MAN=$STAGE/usr/share/man/man1
mkdir -p "$MAN"
"$BIN" man --out "$MAN" >/dev/null
gzip -9n "$MAN"/*.1
"$BIN" completions bash >"$OUT/ibfabric.bash"
"$BIN" completions zsh >"$OUT/_ibfabric"
"$BIN" completions fish >"$OUT/ibfabric.fish"
install -D -m 0644 "$OUT/ibfabric.bash" "$STAGE/usr/share/bash-completion/completions/ibfabric"
install -D -m 0644 "$OUT/_ibfabric" "$STAGE/usr/share/zsh/vendor-completions/_ibfabric"
install -D -m 0644 "$OUT/ibfabric.fish" "$STAGE/usr/share/fish/vendor_completions.d/ibfabric.fish"

# Library dependencies as dpkg-shlibdeps finds them (libc, libibmad,
# libibumad); the plugin's libopensm symbols come from the OpenSM that
# loads it.
mkdir -p "$STAGE/debian"
touch "$STAGE/debian/control"
SHLIBS=$(cd "$STAGE" && dpkg-shlibdeps -O --ignore-missing-info -e usr/bin/ibfabric \
  -e usr/bin/ibfabric-pathrecord-sl -e usr/bin/ibfabric-sl2vl-read -e usr/bin/ibfabric-mcast-join \
  2>"$ROOT/$OUT/shlibdeps.log" | sed -n 's/^shlibs:Depends=//p')
rm -rf "$STAGE/debian"
if [ -z "$SHLIBS" ]; then
  cat "$OUT/shlibdeps.log" >&2
  echo "build-deb: dpkg-shlibdeps found no library dependencies" >&2
  exit 1
fi
# OpenSM loads only a plugin built for its own OSM_VERSION (the upstream
# version): the package breaks any other.
OSM=$(dpkg-query -W -f='${Version}' opensm 2>/dev/null | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//')
if [ -z "$OSM" ]; then
  echo "build-deb: opensm is not installed: the plugin is built against it" >&2
  exit 1
fi
OSM_NEXT=$(echo "$OSM" | awk -F. -v OFS=. '{$NF = $NF + 1; print}')
SIZE=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$ARCH/" -e "s/@SHLIBS@/${SHLIBS:-libc6}/" \
  -e "s/@SIZE@/$SIZE/" -e "s/@OSM_LO@/$OSM/" -e "s/@OSM_HI@/$OSM_NEXT~/" deploy/debian/control.in >"$STAGE/DEBIAN/control"
install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$STAGE/DEBIAN/"
install -m 0644 deploy/debian/triggers "$STAGE/DEBIAN/triggers"
(cd "$STAGE" && find etc -type f | sed 's|^|/|' | sort) >"$STAGE/DEBIAN/conffiles"
(cd "$STAGE" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z |
  xargs -0 md5sum) >"$STAGE/DEBIAN/md5sums"
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$OUT/" >/dev/null
DEB=$OUT/ibfabric_${VERSION}_${ARCH}.deb
echo "$DEB"
