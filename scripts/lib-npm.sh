# shellcheck shell=bash
# lib-npm.sh: the npm packages the live checks run (Claude Code, Codex), installed once.
#
#   . "$WFS_ROOT/scripts/lib-npm.sh"
#   npm_once PACKAGE VERSION PREFIX COMMAND || fail "..."

# npm_once PACKAGE VERSION PREFIX COMMAND: installs PACKAGE@VERSION into PREFIX unless PREFIX
# already has COMMAND (npm is needed only then), and checks that COMMAND runs. Says on stderr
# what failed, and returns 1.
npm_once() {
  local package=$1 version=$2 prefix=$3 command=$4
  local bin=$prefix/node_modules/.bin/$command
  if [ ! -x "$bin" ]; then
    command -v npm > /dev/null || { echo "npm is needed to install $package" >&2; return 1; }
    echo "installing $package@$version into $prefix" >&2
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-fund --no-audit --loglevel=error \
      "$package@$version" > /dev/null || { echo "npm could not install $package@$version" >&2; return 1; }
  fi
  "$bin" --version > /dev/null 2>&1 || { echo "$bin does not run" >&2; return 1; }
}
