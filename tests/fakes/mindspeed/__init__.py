"""A stand-in for MindSpeed's patch and feature managers, written from their documented behaviour
(../shared/reference/megatron_mindspeed_profiling.md §2.2-2.3) so our registry can be tested for
stacking, re-application and removal. Only the parts mindspeed_prof touches are modelled."""
