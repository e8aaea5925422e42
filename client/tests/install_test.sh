#!/usr/bin/env bash
# The Python package as a team installs it: `meson install` into a scratch DESTDIR, then
# `import stormgate` from a clean environment (no PYTHONPATH into the source or build tree,
# no STORMGATE_PYEXT_DIR, another working directory) finds the package and its native module.
#   install_test.sh BUILD_DIR
set -uo pipefail
BUILD="$1"; dest="$(mktemp -d)"
trap 'rm -rf "$dest"' EXIT
meson install -C "$BUILD" --no-rebuild --destdir "$dest" --quiet > "$dest.log" 2>&1 || { cat "$dest.log"; rm -f "$dest.log"; echo "FAIL: meson install"; exit 1; }
rm -f "$dest.log"
mod="$(find "$dest" -name '_stormgate*.so' | head -1)"
pkg="$(find "$dest" -path '*/stormgate/__init__.py' | head -1)"
[[ -n "$mod" && -n "$pkg" ]] || { echo "FAIL: installed tree lacks _stormgate or the stormgate package"; find "$dest" | head -30; exit 1; }
site="$(dirname "$mod")"
[[ "$(dirname "$(dirname "$pkg")")" == "$site" ]] || { echo "FAIL: module and package in different directories"; exit 1; }
cd / && env -i PATH=/usr/bin:/bin PYTHONPATH="$site" /usr/bin/python3 -c '
import stormgate, stormgate.ddp, stormgate.process_group, _stormgate
import torch.distributed as dist
assert hasattr(dist.Backend, "STORMGATE")  # the backend registered on import
assert stormgate.__file__.startswith("'"$site"'"), stormgate.__file__
assert _stormgate.__file__.startswith("'"$site"'"), _stormgate.__file__
c = stormgate.Client(host="127.0.0.1", port=9, worker_index=0)  # no gateway needed to construct
print("installed:", stormgate.__file__, _stormgate.__file__)
' || { echo "FAIL: import stormgate from the installed tree"; exit 1; }
echo ok
