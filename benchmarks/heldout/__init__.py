"""The held-out evaluation: lbi at its defaults against L-BFGS at its best grid alpha, on
architectures, photographs, noise levels and seeds that nothing in lbi was tuned on.

    python -m benchmarks.heldout --half calibrate|report [--quick] [--arch A,B] [--resume]
        [--cap SECONDS] [--write]

Architectures (``nets.ARCHS``): 15 torchvision slices and small networks built in code, each
exported as ONNX or ``.pt2``; random weights (the framework's initialisation from the case's
seed) and trained weights (``training``: a denoising autoencoder's encoder, trained on the
calibration photographs only, cached in a git-ignored folder).

The split (``design``): eight of scikit-image's bundled photographs, each a 256 x 256 region
resized to the case's side; the calibration half uses astronaut, coffee, chelsea and
immunohistochemistry with seeds 0, 1, 2; the report half rocket, camera, retina and coins
with seeds 3, 4, 5. The rule is fixed in code, so the halves share no photograph and no
seed; the trained weights saw only calibration photographs. Calibrate defaults on the first
half; look at the report half only for the final table, and change no default after it.

The design (``design.cases``): per half and architecture four 64 x 64 cases, one per noise
level (none, 0.5 %, 1 %, 5 % of the clean output's RMS), two with random and two with trained
weights, photographs and seeds rotating with the architecture; plus resnet18's stem + layer1
at 128 x 128 and 224 x 224 (1 % noise) for the whole-run and memory bars.

Each case (``measure``): ``lbi invert --network F --image crop.png --noise-std S --seed K``
in a subprocess, and the same with ``--max-iter 1``; solve time = the difference of their
wall times. L-BFGS on lbi's own noisy y; its time to within 0.2 dB of its final PSNR. Rows go
to ``benchmarks/results/heldout-<half>.csv``; ``--write`` puts the table, its command and the
load average into ``benchmarks/RESULTS.md``.
"""
