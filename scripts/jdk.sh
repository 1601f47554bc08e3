#!/usr/bin/env bash
# Sourced: sets JAVA_HOME (and PATH) to a JDK >= 22, or exits saying how to get one. Needs no root
# and installs nothing, so that what only runs the built CLI can use it alone.
# A JDK >= 22: JAVA_HOME if it is one, else the newest under /usr/lib/jvm, else java on PATH.
java_major() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }
find_jdk() {
  local c best="" bestv=0 v
  for c in "${JAVA_HOME:-}" /usr/lib/jvm/* "$(dirname "$(dirname "$(readlink -f "$(command -v javac || echo /nonexistent)")")")"; do
    [ -n "$c" ] && [ -x "$c/bin/javac" ] || continue
    v=$(java_major "$c"); v=${v%%.*}
    if [ -n "$v" ] && [ "$v" -ge 22 ] && [ "$v" -gt "$bestv" ]; then best=$c; bestv=$v; fi
  done
  [ -n "$best" ] && echo "$best"
}
JAVA_HOME=$(find_jdk) || true
if [ -z "${JAVA_HOME:-}" ]; then
  echo "No JDK >= 22 found (looked at \$JAVA_HOME, /usr/lib/jvm/*, javac on PATH): install one, e.g. Temurin 25" >&2
  exit 1
fi
export JAVA_HOME
export PATH="$JAVA_HOME/bin:$PATH"
