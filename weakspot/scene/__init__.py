"""The Blender scene of the examine stage family: factor space, procedural objects, renderer and data set.

Paper: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``). bpy is imported lazily (only when a renderer starts), so this package imports without Blender.
"""
