"""``import mindspeed_prof.auto`` at the top of a copied entry script arms the patches.

It does nothing unless the command line carries ``--profile*`` flags. In MindSpeed scripts, put
it after ``import mindspeed.megatron_adaptor`` (or MindSpeed-LLM's adaptor import).
"""

from mindspeed_prof.patches import activate

activate(by="auto")
