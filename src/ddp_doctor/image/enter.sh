# ddp-doctor's entry inside an image (`check --image`): run it with the image's own Python.
# Mounted read-only with the package at /ddp-doctor/lib, so the printed engine command works by hand.
for p in python3 python; do
    if command -v "$p" >/dev/null 2>&1; then
        export PYTHONPATH="/ddp-doctor/lib${PYTHONPATH:+:$PYTHONPATH}"
        exec "$p" -m ddp_doctor "$@"
    fi
done
echo "ddp-doctor: no python3 or python on the image PATH" >&2
exit 127
