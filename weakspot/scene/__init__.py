"""The Blender scene of the examine stage family: factor space, procedural objects, renderer and data set.

Paper: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``). bpy is imported lazily (only when a renderer starts), so this package imports without Blender.
"""

from weakspot.scene.objects import CLASSES, OBJECTS, MeshData, build_object, class_index, split_instances  # noqa: F401
from weakspot.scene.renderer import RENDERERS, BlenderRenderer, Renderer, camera_matrix, check_scene_params  # noqa: F401
from weakspot.scene.space import DEFAULT_BOUNDS, FACTORS, FIXED, PAPER_BOUNDS, SEARCHED, SceneSpace  # noqa: F401
from weakspot.scene.dataset import (  # noqa: F401
    contact_sheet,
    images_to_input,
    render_dataset,
    scene_plan,
    scenes_from_table,
)
