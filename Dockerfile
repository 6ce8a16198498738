# MiniMind Studio: the web app (Corpus, Train, Chat, Export) and the /v1 API on port 7860.
#   docker build -t minimind-studio .
#   docker run -p 7860:7860 -v minimind-workspace:/data/workspace minimind-studio
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_UPDATE_DOWNLOAD_COUNTS=0 TOKENIZERS_PARALLELISM=false \
    MINIMIND_HOME=/data/workspace GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 \
    GRADIO_ANALYTICS_ENABLED=False

# a C++ compiler lets torch.compile fuse the training step on CPU (the trainer runs eager without one)
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 user
WORKDIR /app

COPY requirements.txt .
# the CPU build of torch (PyPI's default is a multi-GB CUDA build); the pin in requirements.txt accepts it
# and the trackers the page offers beyond it (the ONNX exports' packages are in requirements.txt)
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
 && pip install -r requirements.txt \
 && pip install tensorboard==2.21.0 trackio==0.43.0

COPY --chown=user:user . .
RUN mkdir -p /data/workspace && chown -R user:user /data
USER user

VOLUME /data/workspace
EXPOSE 7860
CMD ["python", "-m", "webapp"]
