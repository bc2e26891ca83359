#!/usr/bin/env bash
# The wheels the H200 image lacks for `import xllm`, `xllm.cuda_runner`, the server and the test collection, downloaded here
# (where PyPI is reachable) for CPython 3.12 on manylinux x86_64, to be carried to the GPU machine, which reaches no index.
#
#   bash scripts/gpu_wheels.sh [DIR]      # DIR defaults to .whl (ignored by git; name it in the device call's `carry`)
#
# Then it checks, without installing anything:
# - closure: every requirement of every wheel (markers read for CPython 3.12 on Linux x86_64, extras left out) is another
#   wheel here or a package of the image (scripts/h200_packages.txt, from the device's KINDS.md; versions checked where known);
# - no wheel is a package the image already has, and one version of each;
# - the wheels plus the working tree that travels fit the 64 MiB a device call carries.
# It prints the carry list and the install line; scripts/gpu_check.sh runs that install itself when DIR exists.
# Pins: the versions CI installs here (settings.ini's requirements and dev_requirements resolved on this machine).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
PY=${PYTHON:-python3}
WHEELS=(
  fastcore==1.7.29                                                          # xllm: engine, kv_cache, scheduler, parallel, tests/conftest
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.55.0 opentelemetry-api==1.45.2  # the server
  pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2
  llguidance==1.9.1                                                         # structured outputs (xllm.grammar)
  openai==3.60.0 jiter==0.19.0 sniffio==1.3.1 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5   # the server tests' client
  gguf==0.19.0                                                              # tests/test_failure_modes.py's GGUF writer
)
PLAT=(--platform manylinux2014_x86_64)
for n in $(seq 17 39); do PLAT+=(--platform "manylinux_2_${n}_x86_64"); done   # pip matches manylinux_2_N exactly; the image's glibc is newer

mkdir -p "$DIR"
if compgen -G "$DIR/*" >/dev/null && [[ -n "$(find "$DIR" -mindepth 1 ! -name '*.whl')" ]]; then
  echo "error: $DIR holds files other than wheels; give an empty or wheels-only folder" >&2; exit 2
fi
rm -f "$DIR"/*.whl
echo "downloading ${#WHEELS[@]} wheels into $DIR (cp312, manylinux x86_64)"
$PY -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${PLAT[@]}" -d "$DIR" "${WHEELS[@]}" 2>&1 | grep -v "^WARNING: Location" || true
n=$(find "$DIR" -maxdepth 1 -type f -name '*.whl' | wc -l)
(( n == ${#WHEELS[@]} )) || { echo "error: only $n of ${#WHEELS[@]} wheels downloaded (see pip's messages above)" >&2; exit 1; }

$PY - "$DIR" <<'EOF'
import re, subprocess, sys, zipfile
from email.parser import HeaderParser
from pathlib import Path
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name as canon
from packaging.version import Version

d = Path(sys.argv[1])
ENV = dict(python_version="3.12", python_full_version="3.12.3", sys_platform="linux", platform_system="Linux", os_name="posix",
           platform_machine="x86_64", implementation_name="cpython", platform_python_implementation="CPython", extra="")
image = {}
for line in Path("scripts/h200_packages.txt").read_text().splitlines():
    if line.strip() and not line.startswith("#"):
        name, _, ver = line.strip().partition("==")
        image[canon(name)] = ver or None
wheels = {}
for w in sorted(d.glob("*.whl")):
    with zipfile.ZipFile(w) as z:
        meta = HeaderParser().parsestr(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
    name = canon(meta["Name"])
    if name in wheels: sys.exit(f"error: two versions of {name}: {wheels[name][1].name} and {w.name} (one stops the whole install)")
    wheels[name] = (Version(meta["Version"]), w, meta.get_all("Requires-Dist") or [])
bad, unversioned = [], {}
for name in [n for n in wheels if n in image]:                 # the image has it: carrying it would shadow the image's copy
    print(f"dropped {wheels[name][1].name}: the image has {name}"); wheels.pop(name)[1].unlink()
for name, (ver, w, reqs) in wheels.items():
    for r in map(Requirement, reqs):
        if r.marker is not None and not r.marker.evaluate(ENV): continue
        dep = canon(r.name)
        if dep in wheels:
            if wheels[dep][0] not in r.specifier: bad.append(f"{name} needs {r}, the wheel is {wheels[dep][0]}")
        elif dep in image:
            if image[dep] and Version(image[dep]) not in r.specifier: bad.append(f"{name} needs {r}, the image has {image[dep]}")
            elif not image[dep]: unversioned[dep] = unversioned.get(dep, SpecifierSet()) & r.specifier
        else: bad.append(f"{name} needs {r}: neither carried nor on the image")
if bad: sys.exit("error: the wheels are not complete:\n  " + "\n  ".join(bad))
files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], capture_output=True, check=True).stdout.split(b"\0")
tree = sum(p.stat().st_size for f in files if f and (p := Path(f.decode())).is_file())
whl = sum(w.stat().st_size for _, w, _ in wheels.values())
MIB = 2**20
print(f"{len(wheels)} wheels, {whl / MIB:.1f} MiB; the working tree that travels {tree / MIB:.1f} MiB; together "
      f"{(whl + tree) / MIB:.1f} of the 64 MiB a call carries")
if whl + tree > 64 * MIB: sys.exit("error: over the 64 MiB a device call carries")
print("met by the image, whose versions KINDS.md does not record (gpu_check.sh's env section imports them there): " + ", ".join(f"{n}{s}" for n, s in sorted(unversioned.items())))
EOF
cat <<EOF
carry: ["$DIR"]
install (gpu_check.sh does this itself when $DIR exists):
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/xllm-site $DIR/*.whl && export PYTHONPATH=/tmp/xllm-site:\$PWD
EOF
