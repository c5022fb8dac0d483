"""Builds the trainer's C++ extension (``pip install .`` or ``python setup.py build_ext``)."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="legacy-trainer",
    ext_modules=[
        CppExtension(
            "legacy_trainer_comm",
            ["csrc/comm.cpp"],
            define_macros=[("USE_C10D_NCCL", None)],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
