#!/bin/sh
# usage: nginx.sh PORT — nginx.conf with its port and a scratch folder filled in, then nginx in
# the foreground, exec'd so that it is the process the runner started.
set -eu
dir=$(mktemp -d "${TMPDIR:-/tmp}/rxbench-nginx.XXXXXX")
sed -e "s/{port}/$1/g" -e "s#{dir}#$dir#g" "$(dirname "$0")/nginx.conf" >"$dir/nginx.conf"
exec nginx -e stderr -p "$dir" -c "$dir/nginx.conf"
