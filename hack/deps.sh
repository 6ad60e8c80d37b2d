#!/usr/bin/env bash
# make deps: install the Debian packages of every program that a test, the demo, a
# benchmark or a script of ours runs, when any is missing. hack/deps.txt lists the
# programs and their packages (hack/deps_test.go fails when the code runs a program that
# list does not name). When everything is there it runs no apt at all; otherwise, as
# root, apt-get update and a noninteractive install of what is missing; not as root, it
# names the missing packages and fails.
#
# usage: hack/deps.sh        (DTNFLOW_DEPS_MANIFEST overrides the list, for the tests)
set -euo pipefail
manifest=${DTNFLOW_DEPS_MANIFEST:-$(dirname "$0")/deps.txt}

# missing: "program package" for each program of the list that is not here. A program
# is looked up on PATH as the tests will look it up; an absolute path must exist.
missing() {
  local prog pkg why
  while read -r prog pkg why; do
    case $prog in ''|'#'*) continue ;; esac
    case $prog in
      /*) [ -e "$prog" ] && continue ;;
      *) command -v "$prog" >/dev/null 2>&1 && continue ;;
    esac
    echo "$prog $pkg"
  done < "$manifest"
}

need=$(missing)
[ -z "$need" ] && exit 0

# Programs that Debian does not install (package "-": Go) are the machine's to provide.
not_debian=$(awk '$2 == "-" {print $1}' <<< "$need")
[ -z "$not_debian" ] || { echo "deps: missing $(echo $not_debian) (not a Debian package: see DEVELOPERS.md)" >&2; exit 1; }
packages=$(awk '{print $2}' <<< "$need" | sort -u | tr '\n' ' ')
programs=$(awk '{print $1}' <<< "$need" | tr '\n' ' ')
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing ${programs% }; as root, run make deps or: apt-get install -y ${packages% }" >&2
  exit 1
fi

echo "deps: installing ${packages% } (for ${programs% })" >&2
t0=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
# DPkg::Lock::Timeout: wait for another apt (another make deps) instead of failing.
apt-get -o DPkg::Lock::Timeout=600 update -qq
# shellcheck disable=SC2086
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $packages >/dev/null
still=$(missing)
if [ -n "$still" ]; then
  echo "deps: installed ${packages% } but still missing: $(awk '{printf "%s (%s) ", $1, $2}' <<< "$still")- not on PATH=$PATH?" >&2
  exit 1
fi
echo "deps: installed in $(( $(date +%s) - t0 ))s" >&2
