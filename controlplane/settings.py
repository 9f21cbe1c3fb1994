"""Tandem settings, read from the environment (12-factor). See README "Configuration"."""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
from pathlib import Path

from controlplane.env import (
    ConfigError,
    database_from_url,
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_seconds,
    env_str,
    env_url,
)
from rebalancing.inplace import DRAIN_TIMEOUT_SECONDS

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", hint="a long random string (50+ characters)")
_KEYGEN = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
if len(SECRET_KEY) < 32:
    raise ConfigError(f"SECRET_KEY is too short; use 50+ random characters ({_KEYGEN})")
ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"], hint="host names such as tandem.example.com"
)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [], hint="origins such as https://tandem.example.com")
for _origin in CSRF_TRUSTED_ORIGINS:
    if not _origin.startswith(("http://", "https://")):
        raise ConfigError(f"CSRF_TRUSTED_ORIGINS entry {_origin!r} needs a scheme, e.g. https://{_origin}")

DATABASE_URL = env_url(
    "DATABASE_URL", ("postgres", "postgresql", "sqlite"), "postgres://user:pass@host:5432/tandem"
)
DATABASES = {
    "default": database_from_url(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0))
}
DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME", "test_tandem")}
REDIS_URL = env_url("REDIS_URL", ("redis", "rediss", "unix"), "redis://127.0.0.1:6379/0")


def _fernet_keys() -> list[str]:
    keys = env_list(
        "FIELD_ENCRYPTION_KEYS",
        hint="comma-separated Fernet keys, newest first "
        "(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')",
    )
    for index, key in enumerate(keys):
        try:
            ok = len(base64.urlsafe_b64decode(key.encode())) == 32
        except (binascii.Error, ValueError):
            ok = False
        if not ok:
            raise ConfigError(
                f"FIELD_ENCRYPTION_KEYS entry {index + 1} is not a Fernet key; each must be 32 url-safe "
                "base64-encoded bytes (Fernet.generate_key())"
            )
    return keys


FIELD_ENCRYPTION_KEYS = _fernet_keys()
# API keys are stored as HMAC-SHA256 under this pepper. Unset: derived from SECRET_KEY (so changing
# SECRET_KEY without setting API_KEY_PEPPER to the old derived value invalidates every key).
_API_KEY_PEPPER = env_str("API_KEY_PEPPER", "")
if _API_KEY_PEPPER and len(_API_KEY_PEPPER) < 32:
    raise ConfigError("API_KEY_PEPPER is too short; use 32+ random characters (or leave it unset)")
API_KEY_PEPPER = hashlib.sha256((_API_KEY_PEPPER or f"tandem-api-key-pepper:{SECRET_KEY}").encode()).digest()
# Rotation: how long the previous secret keeps working unless the rotation names its own grace.
API_KEY_ROTATION_GRACE_SECONDS = env_int("API_KEY_ROTATION_GRACE_SECONDS", 86400, minimum=0)
# Deadline of the key limit check's Redis round trip: a hung Redis fails the request fast (503).
KEYS_REDIS_TIMEOUT_SECONDS = env_int("KEYS_REDIS_TIMEOUT_MS", 500, minimum=10) / 1000
# Where the Kthena router's Service lives (its LoadBalancer address serves every Kthena topology).
KTHENA_ROUTER_SERVICE = env_str("KTHENA_ROUTER_SERVICE", "kthena-system/kthena-router")
if "/" not in KTHENA_ROUTER_SERVICE:
    raise ConfigError("KTHENA_ROUTER_SERVICE must be namespace/name, e.g. kthena-system/kthena-router")
# Where telemetry reads the Kthena router's own /metrics: this Service's Endpoints (port `metrics`).
KTHENA_ROUTER_METRICS_SERVICE = env_str(
    "KTHENA_ROUTER_METRICS_SERVICE", "kthena-system/kthena-router-metrics"
)
if "/" not in KTHENA_ROUTER_METRICS_SERVICE:
    raise ConfigError(
        "KTHENA_ROUTER_METRICS_SERVICE must be namespace/name, e.g. kthena-system/kthena-router-metrics"
    )
GATEWAY_DISCOVERY_SECONDS = env_int("GATEWAY_DISCOVERY_SECONDS", 30, minimum=5)
# The gateway refuses request bodies larger than this (413).
GATEWAY_MAX_BODY_BYTES = env_int("GATEWAY_MAX_BODY_MB", 16, minimum=1) * 1024 * 1024
# The gateway's bulkhead (gateway.bulkhead): at most this many requests of one gateway process wait for
# the first byte of one cluster (serving endpoint) at once; the next go to the fallback at once, or get
# a 503 naming the cap. 0: no cap.
GATEWAY_CLUSTER_MAX_WAITING = env_int("GATEWAY_CLUSTER_MAX_WAITING", 128, minimum=0)
# Speculative admission (keys.speculation): a warm key's request goes upstream while Redis checks its
# limits; nothing of the answer is sent before the check admits it, and a refusal cancels the call.
GATEWAY_SPECULATIVE_ADMISSION = env_bool("GATEWAY_SPECULATIVE_ADMISSION", True)
# Failed key authentications per source address and minute before that address is refused outright.
API_KEY_FAILURE_LIMIT = env_int("API_KEY_FAILURE_LIMIT", 60, minimum=1)

# Behind TLS (production) cookies are secure and HTTP redirects to HTTPS; the standalone demo
# and the test suite run on plain http://127.0.0.1 and turn this off.
TANDEM_HTTPS = env_bool("TANDEM_HTTPS", True)
TANDEM_STANDALONE = env_bool("TANDEM_STANDALONE", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "csp",
    "accounts",
    "audit",
    "clusters",
    "kube",
    "topologies",
    "deployments",
    "telemetry",
    "perfmodel",
    "rebalancing",
    "whatif",
    "keys",
    "gateway",
    "traces",
    "slo",
    "workload",
]

MIDDLEWARE = [
    "controlplane.middleware.HealthCheckMiddleware",  # probes call by pod IP: before Host checks
    "controlplane.middleware.ApiBodyLimitMiddleware",  # 413 in the API's error shape, before any read
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "keys.middleware.KeyGrantMiddleware",
    "controlplane.middleware.DependencyUnavailableMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
ASGI_APPLICATION = "controlplane.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.roles",
                "keys.context_processors.key_policy",
            ],
        },
    },
]

AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "accounts:login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Brute-force protection: failures per (username, client address) within the window lock logins out.
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_LOCKOUT_SECONDS = env_int("LOGIN_LOCKOUT_SECONDS", 900, minimum=1)
# PBKDF2 work factor; unset means Django's default. Only test suites lower it (see Makefile).
PASSWORD_HASH_ITERATIONS = env_int("PASSWORD_HASH_ITERATIONS", 0, minimum=0) or None
if PASSWORD_HASH_ITERATIONS is not None and PASSWORD_HASH_ITERATIONS < 1000:
    raise ConfigError("PASSWORD_HASH_ITERATIONS must be at least 1000 (or unset for the default)")
PASSWORD_HASHERS = [
    "accounts.hashers.TandemPBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
# The lockout holds on every door that checks a password (login page, admin, API).
AUTHENTICATION_BACKENDS = ["accounts.backends.LockoutModelBackend"]
# X-Forwarded-For is believed only from these proxy addresses or networks (audit source IPs, lockouts).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [], hint="proxy addresses or CIDRs such as 10.0.0.0/8")
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ConfigError(
            f"TRUSTED_PROXIES entry {_proxy!r} is not an address or network; use e.g. 10.0.0.5 or 10.0.0.0/8"
        ) from None

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "var" / "staticfiles")))
# Front-end libraries come from npm (package.json / package-lock.json), never copied into the repo.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/htmx", BASE_DIR / "node_modules" / "htmx.org" / "dist"),
    ("vendor/uplot", BASE_DIR / "node_modules" / "uplot" / "dist"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis socket deadlines: a hung Redis (SIGSTOP, a full network path) costs a request at most this long
# instead of hanging it; after a failure the cache skips Redis for REDIS_RETRY_SECONDS in that process.
REDIS_CONNECT_TIMEOUT_SECONDS = env_seconds("REDIS_CONNECT_TIMEOUT_SECONDS", 1.0)
REDIS_SOCKET_TIMEOUT_SECONDS = env_seconds("REDIS_SOCKET_TIMEOUT_SECONDS", 1.0)
REDIS_RETRY_SECONDS = env_seconds("REDIS_RETRY_SECONDS", 3.0, minimum=0)
CACHES = {
    "default": {
        "BACKEND": "controlplane.cache.GuardedRedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "tandem"),
        "OPTIONS": {
            "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_SECONDS,
            "socket_timeout": REDIS_SOCKET_TIMEOUT_SECONDS,
        },
    }
}

# CHANNEL_LAYER=pubsub publishes a group message once and each ASGI process hands it to its local
# sockets: one Redis round trip per process instead of one per socket, which is what keeps fan-out
# to hundreds of dashboards fast (bench/telemetry_fanout.py measures both; it is the default). "core"
# (lists) also lets code outside a consumer receive from a channel across separate event loops.
# Only a connect deadline here: pub/sub readers wait on idle sockets by design. Sends are bounded
# in controlplane.broadcast instead.
_CHANNEL_HOST = {"address": REDIS_URL, "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_SECONDS}
CHANNEL_LAYER = env_choice("CHANNEL_LAYER", "pubsub", ("core", "pubsub"))
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [_CHANNEL_HOST], "prefix": env_str("CHANNEL_PREFIX", "tandem")},
    }
    if CHANNEL_LAYER == "pubsub"
    else {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [_CHANNEL_HOST], "prefix": env_str("CHANNEL_PREFIX", "tandem"), "capacity": 1000},
    }
}

# Security headers; `manage.py check --deploy` passes with TANDEM_HTTPS=true and DEBUG=false.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = TANDEM_HTTPS
CSRF_COOKIE_SECURE = TANDEM_HTTPS
SECURE_SSL_REDIRECT = TANDEM_HTTPS and env_bool("SECURE_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if TANDEM_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = TANDEM_HTTPS
SECURE_HSTS_PRELOAD = TANDEM_HTTPS
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'", "ws:", "wss:"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
    }
}

REST_FRAMEWORK = {
    # Keys first: an unauthenticated call gets 401 with `WWW-Authenticate: Bearer`, and a request
    # with a bad key is refused even if it also carries a session cookie.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "keys.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.RolePermission", "keys.permissions.ScopePermission"],
    "DEFAULT_PAGINATION_CLASS": "controlplane.api.pagination.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "controlplane.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON bodies are read with a size, depth and NUL limit (controlplane/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "controlplane.api.parsers.DepthLimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tandem API",
    "DESCRIPTION": "Control plane for prefill/decode disaggregated LLM inference on Kubernetes.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the interactive docs are behind login like the rest (a session or any management key).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SERVE_AUTHENTICATION": [
        "keys.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": False},
    "COMPONENT_SPLIT_REQUEST": True,
    # The shared Error component on every operation's error statuses, and the topology spec's schema.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "controlplane.api.schema.error_responses",
        "gateway.openapi.responses_path",  # the gateway's /v1/responses (a lean ASGI app, outside DRF)
        "gateway.openapi_v1.v1_paths",  # and its other /v1/ endpoints
    ],
    # Swagger UI assets are served from the installed sidecar package, not a CDN (CSP, offline).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Choice sets that share a field name get stable, readable enum names in the schema.
    "ENUM_NAME_OVERRIDES": {
        "UserRoleEnum": "accounts.roles.Role",
        "HealthStateEnum": "clusters.models.HealthState",
        "DeploymentStateEnum": "deployments.models.State",
        "DeploymentKindEnum": "deployments.models.Kind",
        "TelemetryEventKindEnum": "telemetry.snapshot.EVENT_KINDS",
        "KeyKindEnum": "keys.purposes.Kind",
        "KeyScopeEnum": "keys.scopes.Scope",
        "KeyStatusEnum": "keys.models.Status",
        "KeyPurposeEnum": "keys.models.PURPOSE_CHOICES",
        "PdRoleEnum": "deployments.services.ROLES",
    },
}

# Celery: JSON only, late acks, queues named by purpose so they scale apart.
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600, minimum=1)
CELERY_TASK_TIME_LIMIT = CELERY_TASK_SOFT_TIME_LIMIT + 60
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "topologies.tasks.*": {"queue": "deploy"},
    "deployments.tasks.*": {"queue": "deploy"},
    # The cluster check has a queue (and in every deployment form a worker) of its own, so hung telemetry
    # or a long deploy cannot delay the check that reports a cluster down.
    "clusters.tasks.check_cluster": {"queue": "cluster-check"},
    "clusters.tasks.check_all_clusters": {"queue": "cluster-check"},
    "clusters.tasks.*": {"queue": "inventory"},
    "telemetry.tasks.*": {"queue": "telemetry"},
    "rebalancing.tasks.*": {"queue": "deploy"},
}
# An unacknowledged task (its worker died) is redelivered after this many seconds.
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_SECONDS,
    "socket_timeout": REDIS_SOCKET_TIMEOUT_SECONDS,
}
CELERY_BROKER_CONNECTION_TIMEOUT = REDIS_CONNECT_TIMEOUT_SECONDS
# Publishing a task from a web request: give up within about a second rather than hold the request.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0.1,
    "interval_step": 0.2,
    "interval_max": 0.3,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Each app contributes its periodic work here; intervals are seconds.
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}
# Every queue a worker must consume to run all of Tandem's work (standalone, compose, k8s).
TANDEM_QUEUES = ("default", "deploy", "inventory", "telemetry", "cluster-check")
# Beat -> worker -> channel layer -> browser: the heartbeat shows the pipeline is alive.
HEARTBEAT_INTERVAL_SECONDS = env_int("HEARTBEAT_INTERVAL_SECONDS", 5, minimum=1)
CELERY_BEAT_SCHEDULE["controlplane-heartbeat"] = {
    "task": "controlplane.tasks.heartbeat",
    "schedule": float(HEARTBEAT_INTERVAL_SECONDS),
    "options": {"expires": float(HEARTBEAT_INTERVAL_SECONDS)},
}
# Deployments: how long to wait for Ready, whether a failed deploy returns to the last good revision,
# and when a deploy worker that stopped beating is presumed dead (its job is then resumed).
DEPLOY_READY_TIMEOUT_SECONDS = env_int("DEPLOY_READY_TIMEOUT_SECONDS", 600, minimum=1)
DEPLOY_AUTO_ROLLBACK = env_bool("DEPLOY_AUTO_ROLLBACK", True)
DEPLOY_FAIL_FAST_SECONDS = env_int("DEPLOY_FAIL_FAST_SECONDS", 20, minimum=0)
DEPLOY_POLL_SECONDS = float(env_str("DEPLOY_POLL_SECONDS", "1"))
DEPLOY_HEARTBEAT_STALE_SECONDS = env_int("DEPLOY_HEARTBEAT_STALE_SECONDS", 60, minimum=1)
DEPLOY_MAX_ATTEMPTS = env_int("DEPLOY_MAX_ATTEMPTS", 5, minimum=1)
DRIFT_CHECK_SECONDS = env_int("DRIFT_CHECK_SECONDS", 60, minimum=5)
CELERY_BEAT_SCHEDULE["deployments-check-drift"] = {
    "task": "deployments.tasks.check_drift",
    "schedule": float(DRIFT_CHECK_SECONDS),
    "options": {"expires": float(DRIFT_CHECK_SECONDS)},
}
CELERY_BEAT_SCHEDULE["deployments-reap"] = {
    "task": "deployments.tasks.reap_deployments",
    "schedule": float(DEPLOY_HEARTBEAT_STALE_SECONDS),
    "options": {"expires": float(DEPLOY_HEARTBEAT_STALE_SECONDS)},
}
TELEMETRY_INTERVAL_SECONDS = float(env_str("TELEMETRY_INTERVAL_SECONDS", "2"))
if TELEMETRY_INTERVAL_SECONDS < 1:
    raise ConfigError("TELEMETRY_INTERVAL_SECONDS must be at least 1 (seconds)")
# A KV link is "degraded" when its transfer-time p95 exceeds this; SLO alerts need this many
# consecutive violated (or met) intervals to be raised (or resolved).
# Each engine scrape's deadline (connect and whole answer); default 0.8 x the interval.
TELEMETRY_SCRAPE_TIMEOUT_SECONDS = env_seconds(
    "TELEMETRY_SCRAPE_TIMEOUT_SECONDS", 0.8 * TELEMETRY_INTERVAL_SECONDS
)
TELEMETRY_LINK_SLOW_MS = float(env_int("TELEMETRY_LINK_SLOW_MS", 250, minimum=1))
TELEMETRY_ALERT_INTERVALS = env_int("TELEMETRY_ALERT_INTERVALS", 3, minimum=1)
CELERY_BEAT_SCHEDULE["telemetry-collect-all"] = {
    "task": "telemetry.tasks.collect_all",
    "schedule": TELEMETRY_INTERVAL_SECONDS,
    "options": {"expires": TELEMETRY_INTERVAL_SECONDS},
}
# SLOs: burn rates evaluated on the telemetry cadence; webhook deliveries retried with exponential back-off
# (base, 2x, 4x, ... at most 10 min) up to a bounded number of attempts. TANDEM_EXTERNAL_URL (e.g.
# https://tandem.example.com) makes the links in notifications absolute.
CELERY_BEAT_SCHEDULE["slo-evaluate-all"] = {
    "task": "slo.tasks.evaluate_all",
    "schedule": TELEMETRY_INTERVAL_SECONDS,
    "options": {"expires": TELEMETRY_INTERVAL_SECONDS, "queue": "telemetry"},
}
SLO_DELIVERY_MAX_ATTEMPTS = env_int("SLO_DELIVERY_MAX_ATTEMPTS", 6, minimum=1)
SLO_DELIVERY_BACKOFF_SECONDS = env_seconds("SLO_DELIVERY_BACKOFF_SECONDS", 5.0)
TANDEM_EXTERNAL_URL = env_str("TANDEM_EXTERNAL_URL", "")
CELERY_BEAT_SCHEDULE["telemetry-rollup-and-prune"] = {
    "task": "telemetry.tasks.rollup_and_prune",
    "schedule": 60.0,
    "options": {"expires": 60.0},
}
# Kubernetes API deadlines: per attempt (connect, read), health probes' read, and one call with its retries.
KUBE_CONNECT_TIMEOUT_SECONDS = env_seconds("KUBE_CONNECT_TIMEOUT_SECONDS", 3.0)
KUBE_READ_TIMEOUT_SECONDS = env_seconds("KUBE_READ_TIMEOUT_SECONDS", 15.0)
KUBE_PROBE_READ_TIMEOUT_SECONDS = env_seconds("KUBE_PROBE_READ_TIMEOUT_SECONDS", 5.0)
KUBE_CALL_DEADLINE_SECONDS = env_seconds("KUBE_CALL_DEADLINE_SECONDS", 45.0, minimum=1)
# Rebalancing: the planner's interval (each topology's planner may ask for a longer one).
PLANNER_INTERVAL_SECONDS = float(env_str("PLANNER_INTERVAL_SECONDS", "5"))
if PLANNER_INTERVAL_SECONDS < 1:
    raise ConfigError("PLANNER_INTERVAL_SECONDS must be at least 1 (seconds)")
# How long an in-place role switch waits for the instance's in-flight requests before giving up.
REBALANCE_DRAIN_TIMEOUT_SECONDS = env_seconds(
    "REBALANCE_DRAIN_TIMEOUT_SECONDS", DRAIN_TIMEOUT_SECONDS, minimum=1
)
# How long one step of an in-place switch (a role assignment: its links, the switch itself) may take.
REBALANCE_STEP_TIMEOUT_SECONDS = env_seconds("REBALANCE_STEP_TIMEOUT_SECONDS", 30.0, minimum=1)
CELERY_BEAT_SCHEDULE["rebalancing-planner-tick"] = {
    "task": "rebalancing.tasks.planner_tick_all",
    "schedule": PLANNER_INTERVAL_SECONDS,
    "options": {"expires": PLANNER_INTERVAL_SECONDS},
}
# Clusters: connectivity, permissions, CRDs and node inventory of every registered cluster.
CLUSTER_CHECK_SECONDS = env_int("CLUSTER_CHECK_SECONDS", 60, minimum=10)
# Keys: hourly usage and last use copied from Redis into the database, off the request path.
KEYS_USAGE_ROLLUP_SECONDS = env_int("KEYS_USAGE_ROLLUP_SECONDS", 15, minimum=1)
CELERY_BEAT_SCHEDULE["keys-rollup-usage"] = {
    "task": "keys.tasks.rollup_key_usage",
    "schedule": float(KEYS_USAGE_ROLLUP_SECONDS),
    "options": {"expires": float(KEYS_USAGE_ROLLUP_SECONDS)},
}
CELERY_BEAT_SCHEDULE["gateway-discover-endpoints"] = {
    "task": "gateway.tasks.discover_endpoints",
    "schedule": float(GATEWAY_DISCOVERY_SECONDS),
    "options": {"expires": float(GATEWAY_DISCOVERY_SECONDS)},
}
# Per-request traces: the fraction of normal requests kept (slow and failed ones always are), how
# long a kept trace is kept, how long spans of a slow or failed request are awaited, the OTLP body cap.
# The gateway's trace context (traceparent to the engines, x-tandem-trace-id, kept traces); off: none.
TRACES_GATEWAY = env_bool("TRACES_GATEWAY", True)
TRACES_HEAD_SAMPLE_RATE = float(env_str("TRACES_HEAD_SAMPLE_RATE", "0.01"))
if not 0 <= TRACES_HEAD_SAMPLE_RATE <= 1:
    raise ConfigError("TRACES_HEAD_SAMPLE_RATE must be a fraction from 0 to 1, e.g. 0.01")
TRACES_TAIL_PER_SECOND = env_int("TRACES_TAIL_PER_SECOND", 10, minimum=0)
TRACES_RETENTION_HOURS = env_int("TRACES_RETENTION_HOURS", 72, minimum=1)
TRACES_KEEP_WINDOW_SECONDS = env_int("TRACES_KEEP_WINDOW_SECONDS", 900, minimum=10)
TRACES_PENDING_SECONDS = env_int("TRACES_PENDING_SECONDS", 120, minimum=5)
TRACES_MAX_BODY_BYTES = env_int("TRACES_MAX_BODY_MB", 8, minimum=1) * 1024 * 1024
CELERY_BEAT_SCHEDULE["traces-prune"] = {
    "task": "traces.tasks.prune_traces",
    "schedule": 600.0,
    "options": {"expires": 600.0},
}
CELERY_BEAT_SCHEDULE["clusters-check-all"] = {
    "task": "clusters.tasks.check_all_clusters",
    "schedule": float(CLUSTER_CHECK_SECONDS),
    "options": {"expires": float(CLUSTER_CHECK_SECONDS)},
}

LOG_LEVEL = env_choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error")).upper()
LOG_FORMAT = env_choice("LOG_FORMAT", "text", ("text", "json"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "controlplane.logging.JsonFormatter"},
    },
    "filters": {
        "redact": {"()": "controlplane.logging.RedactSecretsFilter"},
        "routine_refusal": {"()": "controlplane.logging.RoutineRefusalFilter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["redact"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A 403 (a viewer on an admin page) is one warning line, not a traceback.
        "django.request": {"filters": ["routine_refusal"]},
        "kubernetes": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
        # uvicorn configures its loggers with handlers of its own before Django loads; taking them
        # over here puts its access log (full URLs) and error log through the redacting handler.
        "uvicorn": {"handlers": ["console"], "propagate": False},
        "uvicorn.access": {"handlers": ["console"], "propagate": False},
    },
}
