# The hub of a Zero to JupyterHub deployment at the students' jupyterhub version. The chart's own hub image
# (quay.io/jupyterhub/k8s-hub, chart 4.4.0) runs JupyterHub 5.5.0, and a hub whose major version differs from the
# single-user servers' warns of redirect loops; the course's image (binder/) has jupyterhub==6.1.1. This image is
# the chart's hub with that JupyterHub (tests/test_hub_image.py keeps the pin equal to pyproject.toml's hub extra).
# NOT built or run in this repository's tests (no container runtime, no cluster): build it, and check that the
# chart's kubespawner starts a server with it on a test cluster before a class.
ARG CHART_HUB_IMAGE=quay.io/jupyterhub/k8s-hub:4.4.0
FROM ${CHART_HUB_IMAGE}
RUN pip install --no-cache-dir jupyterhub==6.1.1
