# LLM GPU Planner: the Streamlit dashboard in a small, non-root image.
#   docker build -t llm-gpu-planner .
#   docker run --rm -p 8501:8501 -e STREAMLIT_SERVER_COOKIE_SECRET="$(openssl rand -hex 32)" llm-gpu-planner
# Settings come from .streamlit/config.toml (copied below); any of them can be overridden with
# STREAMLIT_<SECTION>_<OPTION> environment variables. See docs/DEPLOY.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    STREAMLIT_SERVER_HEADLESS=true

# A fixed numeric UID so that Kubernetes' runAsNonRoot can verify it.
RUN groupadd --gid 10001 app && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin app

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-compile -r requirements.txt

# The application only (see .dockerignore): owned by root, read-only for the app user.
COPY app.py ./
COPY .streamlit/config.toml ./.streamlit/config.toml
COPY app_pages ./app_pages
COPY core ./core
COPY data ./data

USER 10001:10001
EXPOSE 8501

# python:3.11-slim has no curl: ask the health endpoint with Python's standard library.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read() == b'ok' else 1)"]

# The README's run command (`streamlit run app.py`), listening on every interface of the container.
CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
