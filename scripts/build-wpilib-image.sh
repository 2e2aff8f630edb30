#!/usr/bin/env bash
# Builds the classroom FRC image from WPILib's Linux installer archive, offline:
#
#   bash scripts/build-wpilib-image.sh /path/to/WPILib_Linux-<version>.tar.gz   # → classroom-wpilib:<version>
#
# The archive (an allwpilib release asset) holds WPILib's installer and its artifacts archive,
# WPILib_Linux-<version>/WPILib_Linux-<version>-artifacts.tar.gz, which holds what the installer
# lays out under ~/wpilib/<year>: jdk/, maven/ (the offline Maven repository), vendordeps/,
# vsCodeExtensions/*.vsix and installUtils/ (fullConfig.json: the Gradle distribution's zip and
# the hash of its wrapper folder; upgradeConfig.json: the year; vscodeConfig.json: the extensions).
# This script reads the artifacts as WPILib's installer does (wpilibsuite/WPILibInstaller-Avalonia),
# checks the layout (one line naming what is wrong when it is not WPILib's archive), and builds
# images/wpilib/Dockerfile FROM the workspace image (WPILIB_BASE_IMAGE, default
# classroom-workspace:latest) with no network:
#   /opt/wpilib/<year>/{jdk,maven,vendordeps}   JAVA_HOME, WPILIB_HOME; ~/wpilib links there
#   /opt/wpilib/gradle-user-home                GRADLE_USER_HOME: the Gradle distribution unpacked in
#                                               {permwrapper,wrapper}/dists/<dist>/<hash>/ (where a
#                                               WPILib project's wrapper looks), init.d/classroom-sim.gradle,
#                                               gradle.properties (images/wpilib/)
#   code-server's built-in extensions           WPILib's extension and the Java ones it lists
#                                               (code-server --install-extension, offline)
#   /usr/local/share/classroom/starter          WPILib's Java project (its gradle/ template in WPILib's
#                                               extension) with the classroom's robot, or, when the
#                                               extension has no template, the offline starter with
#                                               its gradlew running the installed Gradle
#   /etc/skel                                   ~/wpilib and code-server's machine settings (JVM bounds)
# The image carries the label service.workspace-image-hash=<hash of the archive's sha256, the base
# image, images/wpilib and this script>; when the tag already has it, nothing is built. Concurrent
# builds wait for each other (the workspace builder's lock). images/wpilib/README.md says what has
# and has not run with a real archive.
#
# Settings: WPILIB_IMAGE_TAG (default classroom-wpilib:<version>), WPILIB_BASE_IMAGE,
# WORKSPACE_IMAGE_CACHE (where the work directory and the lock are, as for the workspace builder).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=build-wpilib-image
SELF="$ROOT/scripts/$(basename "$0")"
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
if [ "${CLASSROOM_BUILD_ENV:-}" != clean ]; then
  # The archive's path survives clean_environment's exec (which passes no arguments) in this
  # variable, made absolute.
  [ "$#" -le 1 ] || die "usage: bash scripts/build-wpilib-image.sh /path/to/WPILib_Linux-<version>.tar.gz (one archive, got $# arguments)"
  WPILIB_ARCHIVE="${1:-}"
  if [ -n "$WPILIB_ARCHIVE" ] && [ -d "$(dirname "$WPILIB_ARCHIVE")" ]; then
    WPILIB_ARCHIVE="$(cd "$(dirname "$WPILIB_ARCHIVE")" && pwd)/$(basename "$WPILIB_ARCHIVE")"
  fi
  export WPILIB_ARCHIVE
fi
clean_environment "$SELF" WPILIB_ARCHIVE WPILIB_IMAGE_TAG WPILIB_BASE_IMAGE WORKSPACE_IMAGE_CACHE

SRC="$ROOT/images/wpilib"
STARTER="$ROOT/images/workspace/starter"
HASH_LABEL=service.workspace-image-hash
BASE="${WPILIB_BASE_IMAGE:-classroom-workspace:latest}"
NODE_BIN="$ROOT/node_modules/.bin/node"
ARCHIVE="${WPILIB_ARCHIVE:-}"

# ---- the archive: its name, then (below) its contents ------------------------------------------
[ -n "$ARCHIVE" ] || die "usage: bash scripts/build-wpilib-image.sh /path/to/WPILib_Linux-<version>.tar.gz (WPILib's Linux installer, from https://github.com/wpilibsuite/allwpilib/releases)"
NAME="$(basename "$ARCHIVE")"
VERSION="$(printf '%s' "$NAME" | sed -n 's/^WPILib_Linux-\([0-9][0-9A-Za-z.+_-]*\)\.tar\.gz$/\1/p')"
[ -n "$VERSION" ] || die "$NAME is not WPILib's Linux installer archive: expected a file named WPILib_Linux-<version>.tar.gz (from https://github.com/wpilibsuite/allwpilib/releases)"
[ -f "$ARCHIVE" ] && [ -r "$ARCHIVE" ] || die "$ARCHIVE: no such file (or not readable)"
[ "$(head -c 2 "$ARCHIVE" | od -An -tx1 | tr -d ' \n')" = 1f8b ] || die "$NAME is not WPILib's Linux installer archive: it is not gzip-compressed"
# A version's characters that a Docker tag cannot hold become "-".
TAG="${WPILIB_IMAGE_TAG:-classroom-wpilib:$(printf '%s' "$VERSION" | tr -c 'A-Za-z0-9_.-' '-')}"
TOP="WPILib_Linux-$VERSION"
ARTIFACTS="$TOP/$TOP-artifacts.tar.gz"

command -v docker >/dev/null 2>&1 || die "docker is missing: install Docker Engine (scripts/provision.sh does)"
docker info >/dev/null 2>&1 || die "Docker Engine does not answer: start dockerd (scripts/provision.sh does)"
[ -x "$NODE_BIN" ] || die "no Node in node_modules/.bin: run npm install first"
command -v unzip >/dev/null 2>&1 || die "unzip is missing on this machine: apt-get install unzip"
BASE_ID="$(docker image inspect --format '{{.Id}}' "$BASE" 2>/dev/null)" ||
  die "no image $BASE on this engine: build it first (sudo bash scripts/build-workspace-image.sh)"

# ---- key ---------------------------------------------------------------------------------------
HASH="$({
  echo "wpilib $VERSION base $BASE_ID"
  sha256sum <"$ARCHIVE"
  tree_hash "$SRC"
  tree_hash "$STARTER"
  cat "$SELF" "$ROOT/scripts/lib.sh" | sha256sum
} | hash16)"
up_to_date() { image_up_to_date "$HASH_LABEL" "$TAG" "$HASH" retag; }
up_to_date && exit 0

CACHE="${WORKSPACE_IMAGE_CACHE:-/var/cache/classroom-workspace}"
{ mkdir -p "$CACHE" && [ -w "$CACHE" ]; } 2>/dev/null || die "$CACHE is not writable: run this script as root, or set WORKSPACE_IMAGE_CACHE"
lock_cache
up_to_date && exit 0
start_work
start_ms=$(now_ms)
say "building $TAG from $NAME (inputs $HASH)"

# ---- unpack and check the layout ---------------------------------------------------------------
t=$(now_ms)
mkdir -p "$WORK/outer" "$WORK/art"
tar -xzf "$ARCHIVE" -C "$WORK/outer" "$ARTIFACTS" >>"$LOG" 2>&1 ||
  die "$NAME is not WPILib's Linux installer archive: it has no $ARTIFACTS (the installer's artifacts)"
tar -xzf "$WORK/outer/$ARTIFACTS" -C "$WORK/art" >>"$LOG" 2>&1 || die "$NAME: its $ARTIFACTS is not a readable tar.gz"
rm -rf "$WORK/outer"
ART="$WORK/art"
for part in installUtils/fullConfig.json installUtils/upgradeConfig.json installUtils/vscodeConfig.json jdk maven vsCodeExtensions; do
  [ -e "$ART/$part" ] || die "$NAME is not a complete WPILib installer archive: its artifacts have no $part"
done

# What the installer reads of its configuration, one "key value" a line (readConfig's answers).
readConfig() {
  "$NODE_BIN" -e '
    const fs = require("node:fs");
    const read = (name) => JSON.parse(fs.readFileSync(process.argv[1] + "/installUtils/" + name, "utf8"));
    const full = read("fullConfig.json"), upgrade = read("upgradeConfig.json"), vscode = read("vscodeConfig.json");
    const out = [];
    const need = (ok, what) => { if (!ok) throw new Error(what); };
    need(/^[0-9]{4}[A-Za-z0-9_]*$/.test(String(upgrade.FrcYear ?? "")), "upgradeConfig.json has no FrcYear");
    need(/^[A-Za-z0-9._-]+\.zip$/.test(String(full.Gradle?.ZipName ?? "")), "fullConfig.json has no Gradle.ZipName");
    need(/^[a-z0-9]+$/.test(String(full.Gradle?.Hash ?? "")), "fullConfig.json has no Gradle.Hash");
    out.push(`year ${upgrade.FrcYear}`, `gradleZip ${full.Gradle.ZipName}`, `gradleHash ${full.Gradle.Hash}`);
    const ext = (e, role) => {
      need(/^[A-Za-z0-9._@+-]+\.vsix$/.test(String(e?.vsix ?? "")) && /^[A-Za-z0-9-]+\.[A-Za-z0-9._-]+$/.test(String(e?.name ?? "")), `vscodeConfig.json: a ${role} without vsix and name`);
      return `${e.name} ${e.vsix}`;
    };
    for (const e of vscode.thirdPartyExtensions ?? []) out.push(`extension ${ext(e, "third-party extension")}`);
    out.push(`wpilibExtension ${ext(vscode.wpilibExtension, "wpilibExtension")}`);
    console.log(out.join("\n"));
  ' "$ART" 2>>"$LOG"
}
CONFIG="$(readConfig)" || die "$NAME: its installUtils configuration is not WPILib's: $(tail -n 1 "$LOG" | sed 's/^Error: //')"
config() { printf '%s\n' "$CONFIG" | sed -n "s/^$1 //p"; }
YEAR="$(config year)"
GRADLE_ZIP="$(config gradleZip)"
GRADLE_HASH="$(config gradleHash)"
[ -f "$ART/installUtils/$GRADLE_ZIP" ] || die "$NAME: its artifacts have no installUtils/$GRADLE_ZIP, the Gradle distribution fullConfig.json names"

CTX="$WORK/context"
mkdir -p "$CTX/wpilib/$YEAR" "$CTX/vsix" "$CTX/skel/.local/share/code-server/Machine"
for part in jdk maven vendordeps; do
  if [ -e "$ART/$part" ]; then mv "$ART/$part" "$CTX/wpilib/$YEAR/$part"; fi
done

# The Gradle distribution, unpacked where the wrapper of a WPILib project (distributionPath
# permwrapper/dists) and of any other (wrapper/dists) finds it: <dist>/<hash>/<gradle-x>, with the
# marker that says the unpacking finished, as the wrapper itself leaves it.
DIST="${GRADLE_ZIP%.zip}"
GUH="$CTX/gradle-user-home"
unpacked="$GUH/permwrapper/dists/$DIST/$GRADLE_HASH"
mkdir -p "$unpacked" "$GUH/init.d" "$GUH/wrapper/dists/$DIST"
unzip -q "$ART/installUtils/$GRADLE_ZIP" -d "$unpacked" >>"$LOG" 2>&1 || die "$NAME: installUtils/$GRADLE_ZIP is not a readable zip"
GRADLE_DIR="$(cd "$unpacked" && find . -mindepth 3 -maxdepth 3 -path './*/bin/gradle' -type f | sed 's|^\./||; s|/bin/gradle$||')"
[ -n "$GRADLE_DIR" ] && [ "$(printf '%s\n' "$GRADLE_DIR" | wc -l)" = 1 ] ||
  die "$NAME: installUtils/$GRADLE_ZIP is not a Gradle distribution (no <gradle-version>/bin/gradle in it)"
touch "$unpacked/$GRADLE_ZIP.ok"
cp -al "$unpacked" "$GUH/wrapper/dists/$DIST/$GRADLE_HASH"
cp "$SRC/classroom-sim.init.gradle" "$GUH/init.d/classroom-sim.gradle"
cp "$SRC/gradle.properties" "$GUH/gradle.properties"

# The extensions: the Java ones WPILib ships (Red Hat's language support, Microsoft's Java debugger
# and dependency viewer), then WPILib's, last as the installer orders them; C++ and Python
# extensions are left out (the classroom is Java).
EXTENSIONS="$(
  config extension | grep -E '^(redhat\.java|vscjava\.)' || true
  config wpilibExtension
)"
while read -r name vsix; do
  [ -f "$ART/vsCodeExtensions/$vsix" ] || die "$NAME: its artifacts have no vsCodeExtensions/$vsix ($name)"
  mv "$ART/vsCodeExtensions/$vsix" "$CTX/vsix/$vsix"
  printf '%s\n' "$vsix" >>"$CTX/vsix/order"
done <<<"$EXTENSIONS"
WPILIB_VSIX="$(config wpilibExtension | cut -d' ' -f2)"

# The starter: WPILib's new Java project as its extension makes it (resources/gradle/shared, then
# resources/gradle/java, the GradleRIO version of resources/gradle/version.txt and the main class
# put in build.gradle) with the classroom's robot program, README and editor settings on top.
mkdir -p "$WORK/template"
unzip -q "$CTX/vsix/$WPILIB_VSIX" 'extension/resources/gradle/*' -d "$WORK/template" >>"$LOG" 2>&1 || true
GRADLE_TEMPLATE="$WORK/template/extension/resources/gradle"
mkdir -p "$CTX/starter"
if [ -f "$GRADLE_TEMPLATE/java/build.gradle" ] && [ -f "$GRADLE_TEMPLATE/shared/gradlew" ] && [ -s "$GRADLE_TEMPLATE/version.txt" ]; then
  STARTER_FROM="WPILib's Java template (GradleRIO $(tr -d '[:space:]' <"$GRADLE_TEMPLATE/version.txt"))"
  cp -R "$GRADLE_TEMPLATE/shared/." "$GRADLE_TEMPLATE/java/." "$CTX/starter/"
  sed -i "s/###GRADLERIOREPLACE###/$(tr -d '[:space:]' <"$GRADLE_TEMPLATE/version.txt")/; s/###ROBOTCLASSREPLACE###/frc.robot.Main/" "$CTX/starter/build.gradle"
  chmod 0755 "$CTX/starter/gradlew"
  cp -R "$STARTER/src" "$STARTER/README.md" "$CTX/starter/"
  # Its README's section on ./gradlew (which describes the offline stand-in) says what is true here.
  awk -v about="$SRC/starter-gradlew.md" '
    /^## About `\.\/gradlew` here$/ { while ((getline line < about) > 0) print line; skip = 1; next }
    skip && /^## / { skip = 0 }
    !skip' "$STARTER/README.md" >"$CTX/starter/README.md"
  # Its settings.json (WPILib's Java settings) with the classroom's on top.
  "$NODE_BIN" -e '
    const fs = require("node:fs");
    const read = (file) => (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {});
    const wpilib = read(process.argv[1]), ours = read(process.argv[2]);
    const merged = { ...wpilib, ...ours, "files.exclude": { ...wpilib["files.exclude"], ...ours["files.exclude"] } };
    fs.mkdirSync(require("node:path").dirname(process.argv[1]), { recursive: true });
    fs.writeFileSync(process.argv[1], JSON.stringify(merged, null, 2) + "\n");
  ' "$CTX/starter/.vscode/settings.json" "$STARTER/.vscode/settings.json" 2>>"$LOG" || fail "merging the starter's editor settings failed"
else
  # No template: the offline starter, its gradlew running the installed Gradle.
  STARTER_FROM="the offline starter (WPILib's extension has no Java template), ./gradlew running $GRADLE_DIR"
  cp -R "$STARTER/." "$CTX/starter/"
  printf '#!/bin/sh\n# The Gradle of WPILib %s, installed in this image (images/wpilib/README.md).\nexec "$GRADLE_USER_HOME/permwrapper/dists/%s/%s/%s/bin/gradle" "$@"\n' \
    "$VERSION" "$DIST" "$GRADLE_HASH" "$GRADLE_DIR" >"$CTX/starter/gradlew"
  chmod 0755 "$CTX/starter/gradlew"
fi
cp "$SRC/machine-settings.json" "$CTX/skel/.local/share/code-server/Machine/settings.json"
ln -s "/opt/wpilib" "$CTX/skel/wpilib"
cp "$SRC/Dockerfile" "$CTX/Dockerfile"
rm -rf "$ART" "$WORK/template"
say "unpacked and checked: WPILib $VERSION ($YEAR), $GRADLE_DIR, $(wc -l <"$CTX/vsix/order") extensions, starter from $STARTER_FROM in $(since "$t")"

# ---- build, with no network --------------------------------------------------------------------
t=$(now_ms)
old_id="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
DOCKER_BUILDKIT=0 docker build --force-rm -q --network none \
  --build-arg "BASE_IMAGE=$BASE" --build-arg "WPILIB_VERSION=$VERSION" --build-arg "WPILIB_YEAR=$YEAR" \
  --label "$HASH_LABEL=$HASH" -t "$TAG" "$CTX" >>"$LOG" 2>&1 || fail "docker build of $TAG failed"
replace_tag "$TAG" "$old_id"
# Checked: the JDK runs, every extension is installed, nothing is under /home/student.
CHECK='set -eu
  java -version 2>&1 | head -n 1
  [ -z "$(ls -A /home/student)" ] || { echo "/home/student is not empty in the image"; exit 1; }
  listed="$(code-server --user-data-dir /tmp/cs --extensions-dir /usr/local/lib/code-server/lib/vscode/extensions --list-extensions 2>/dev/null)"
  for name in $EXTENSIONS; do
    printf "%s\n" "$listed" | grep -qix "$name" || { echo "extension $name is not installed"; exit 1; }
  done'
if ! docker run --rm --network none -e HOME=/tmp -e "EXTENSIONS=$(cut -d' ' -f1 <<<"$EXTENSIONS" | tr '\n' ' ')" \
  --entrypoint /bin/sh "$TAG" -c "$CHECK" >>"$LOG" 2>&1; then
  docker rmi "$TAG" >/dev/null 2>&1 || true
  fail "the built image failed its check (its JDK, extensions or empty home)"
fi
say "built $TAG ($(image_size_mb "$TAG") MB) in $(since "$start_ms") (image $(since "$t"))"
