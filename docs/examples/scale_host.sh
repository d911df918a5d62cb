#!/usr/bin/env bash
# The scale measurements on a many-core host with a GPU (BUILD_NOTES "Scale: 16 cores and an H100").
# Run from the project root, with tfpipe importable by $PYTHON (default: python):
#
#   bash docs/examples/scale_host.sh data    WORK       # 2,000 clips, v1 + v2 shards, 2,000 photos (needs .[photos])
#   bash docs/examples/scale_host.sh demo    WORK OUT   # estimator_demo on the GPU: input wait and examples/s
#   bash docs/examples/scale_host.sh cores   WORK OUT   # wav -> log-mel and v2 shards pinned to 4 and 16 cores
#   bash docs/examples/scale_host.sh formats WORK OUT   # v1 vs v2 shards at 4 and 16 cores
#   bash docs/examples/scale_host.sh images  WORK OUT   # real photos: tfpipe vs tf-models vs keras, all cores
#   bash docs/examples/scale_host.sh tiny    WORK OUT   # per-element cost: tiny JPEGs, every variant on one core
#   bash docs/examples/scale_host.sh resnet  WORK OUT   # Keras ResNet50 on the GPU fed by tfpipe vs its on-GPU ceiling
#
# Each step writes its log (and JSON where the tool makes one) into OUT.
set -euo pipefail
step=$1 work=$2 out=${3:-$2}
py=${PYTHON:-python}
tfpipe() { "$py" -m tfpipe.cli "$@"; }
mkdir -p "$work" "$out"
all=$(( $(nproc) - 1 ))
case $step in
  data)
    tfpipe synth --output "$work/synth" --per_class 250
    tfpipe prepare --input "$work/synth" --output "$work/v1" --format tfrecord-example --num_shards 16 --store log_mel
    tfpipe prepare --input "$work/synth" --output "$work/v2" --num_shards 16 --store log_mel
    "${PHOTO_PYTHON:-$py}" docs/examples/photo_corpus.py "$work/photos" 2000
    "${PHOTO_PYTHON:-$py}" docs/examples/tiny_jpegs.py "$work/tiny" 2000
    tfpipe prepare --input "$work/photos" --output "$work/photo_shards" --store jpeg --max_side 256 --num_shards 16 ;;
  tiny)  # decode costs next to nothing: the rate is what each chain spends per element
    tfpipe bench --data "$work/tiny" --variants optimized,tf-models,keras,optimized:group_maps=false --height 16 \
        --width 16 --batch_size 64 --cores 1 --noprogress --json "$out/bench_tiny.json" 2>&1 | tee "$out/bench_tiny.log" ;;
  resnet)
    "$py" docs/examples/resnet_gpu.py "$work/photo_shards" 300 128 2>&1 | tee "$out/resnet.log" ;;
  demo)  # the optimized chain, then the seed's naive one on the same data and model
    "$py" -m estimator_demo --model_dir "$work/demo" --train_steps 2000 --evals 2 2>&1 | tee "$out/demo.log"
    "$py" -m estimator_demo --model_dir "$work/demo" --train_steps 2000 --evals 2 --pipeline=naive 2>&1 \
        | tee "$out/demo_naive.log" ;;
  cores)
    tfpipe bench --data "$work/synth" --shards "$work/v2" --variants optimized,shards --cores 4,16 \
        --noprogress --json "$out/bench_cores16.json" 2>&1 | tee "$out/bench_cores16.log" ;;
  formats)
    "$py" docs/examples/shard_formats.py "$work/v1" "$work/v2" 3 3 "0-3;0-$all" 2>&1 | tee "$out/formats16.log" ;;
  images)
    "$py" docs/examples/image_levers.py "$work/photos" 100 3 \
        tf-models,keras,optimized,optimized:reuse_memory=false,tf-models:reuse_memory=true 2>&1 | tee "$out/images16.log" ;;
  *) echo "unknown step $step"; exit 2 ;;
esac
