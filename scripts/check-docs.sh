#!/usr/bin/env bash
# The facade's rustdoc as a user builds it (`cargo doc --no-deps -p redlease` with every
# feature): no rustdoc warning (broken intra-doc links included), and no link on its pages to
# a page that was not generated. Most of the facade's items are written in other crates of the
# workspace and inlined; a link there that names a path the facade does not have is rendered
# as a dead link without a warning, so the pages are checked too. The blanket implementations'
# docs (from dependencies such as tracing) are left out. The methods of a type alias (the
# async adapters' `Client` and `Driver`) are written into `type.impl/*.js`, with links relative
# to the documentation's root: those are checked too.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --no-deps -p redlease --features tokio,smol,mio,tls,metrics
doc="${CARGO_TARGET_DIR:-target}/doc/redlease"
dead=0
while IFS= read -r page; do
  dir=$(dirname "$page")
  while IFS= read -r href; do
    case "$href" in
      "" | http://* | https://* | mailto:* | *static.files*) continue ;;
    esac
    if [ ! -e "$dir/$href" ]; then
      echo "dead link on ${page#"$doc"/}: $href" >&2
      dead=$((dead + 1))
    fi
  done < <(awk '{ i = index($0, "id=\"blanket-implementations\""); if (i) { print substr($0, 1, i); exit } print }' "$page" |
    grep -o 'href="[^"#]*' | sed 's/^href="//' | sort -u)
done < <(find "$doc" -name '*.html')
root=$(dirname "$doc")
while IFS= read -r js; do
  while IFS= read -r href; do
    case "$href" in
      "" | http://* | https://* | mailto:* | *static.files*) continue ;;
    esac
    if [ ! -e "$root/$href" ]; then
      echo "dead link in ${js#"$root"/}: $href" >&2
      dead=$((dead + 1))
    fi
  done < <(grep -o 'href=\\"[^"#\\]*' "$js" | sed 's/^href=\\"//' | sort -u)
done < <(find "$root/type.impl" -name '*.js' 2>/dev/null)
if [ "$dead" != 0 ]; then
  echo "scripts/check-docs.sh: $dead dead link(s) in the facade's docs (write them in terms of what redlease exports)" >&2
  exit 1
fi
echo "scripts/check-docs.sh: the facade's docs build without warnings and without dead links" >&2
