set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SEISGPU_WP_TRACE=fold timeout 60 bundlez/q/integration --test-threads=1 --nocapture wavepacket_gpu_process_pipeline > $OUT/hang.log 2>&1; echo "rc $?"
grep -n "stall" $OUT/hang.log | head -40
tail -5 $OUT/hang.log
gzip $OUT/hang.log
