from configparser import ConfigParser
import setuptools, shlex

# note: all settings are in settings.ini; edit there, not here
config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + "lib_name user branch license status min_python audience language".split()
for o in expected: assert o in cfg, "missing expected setting: {}".format(o)
setup_cfg = {o: cfg[o] for o in cfg_keys}

licenses = {
    'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License'),
    'mit': ('MIT License', 'OSI Approved :: MIT License'),
}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
py_versions = '3.10 3.11 3.12 3.13'.split()

requirements = shlex.split(cfg.get('requirements', ''))
min_python = cfg['min_python']
lic = licenses.get(cfg['license'].lower(), (cfg['license'], None))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
# xllm[notebooks]: what it takes to run the notebooks in Jupyter or with `jupyter nbconvert --execute`: Jupyter, and nbdev's stack at
# the versions the notebooks are written for (nbdev 2.3 reads this settings.ini, which nbdev 3 refuses; it imports pkg_resources,
# gone from setuptools 82 and deprecated with a warning before, so setuptools<81 comes along, as that warning advises: pip downgrades
# a newer one), plus the libraries the notebooks compare with.
notebooks_requirements = shlex.split(cfg.get('notebooks_requirements', ''))
# CuPy is built per CUDA major version; install the extra that matches the CUDA of your driver and torch (nvidia-smi's
# "CUDA Version", torch.version.cuda): xllm[cuda13] for CUDA 13 (torch +cu130, as on the H200 image), xllm[cuda12] for CUDA 12.
# xllm[cuda] is xllm[cuda12], as it always was. Install one of them: the two CuPy builds conflict.
cuda12_requirements = shlex.split(cfg.get('cuda12_requirements', 'cupy-cuda12x'))
# xllm[router]: SGLang's model gateway (a Rust binary wheel), which `xllm serve --data-parallel-size N` puts in front of N replicas (notebook 19a).
router_requirements = shlex.split(cfg.get('router_requirements', 'sglang-router==0.3.2'))
cuda13_requirements = shlex.split(cfg.get('cuda13_requirements', 'cupy-cuda13x'))

setuptools.setup(
    name=cfg['lib_name'],
    license=lic[0],
    classifiers=[
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'].title(),
        'Natural Language :: ' + cfg['language'].title(),
    ] + ['Programming Language :: Python :: ' + o for o in py_versions[py_versions.index(min_python):]]
      + (['License :: ' + lic[1]] if lic[1] else []),
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=['xllm', 'xllm.*']),
    include_package_data=True,
    package_data={'xllm': ['workloads/*.txt',          # the seed's benchmark workloads (`xllm bench --workload hello|prompts`)
                           'csrc/*/*',                 # the kernels' C++ and CUDA sources, compiled at first use
                           'static/*.js']},            # the script of a saved page's widgets (notebook 18)
    install_requires=requirements,
    extras_require={'dev': dev_requirements, 'cuda': cuda12_requirements, 'cuda12': cuda12_requirements, 'cuda13': cuda13_requirements,
                    'widgets': ['ipywidgets'], 'notebooks': notebooks_requirements,
                    'router': router_requirements,
                    'hub': ['huggingface_hub>=0.23']},   # models by Hugging Face id: LLM("owner/name"), xllm -m owner/name (downloads)
    dependency_links=cfg.get('dep_links', '').split(),
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={
        'console_scripts': cfg.get('console_scripts', '').split(),
        'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d'],
    },
    **setup_cfg)
