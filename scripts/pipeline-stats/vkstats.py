#!/usr/bin/env python3
"""Diagnostic (not part of the product): the Vulkan driver's pipeline executable statistics
(VK_KHR_pipeline_executable_properties) for compute SPIR-V modules, e.g. those that
scripts/pipeline-stats/dump-spv.mjs captured from Dawn. On NVIDIA the statistics include the register count
and shared memory per executable (Mesa 25.0 lavapipe does not expose the extension: see exit 3).

Needs only Python 3 (stdlib, ctypes) and libvulkan.so.1 with a driver.
On a machine with the GPU to inspect: `python3 scripts/pipeline-stats/vkstats.py DIR/*.spv` (the .spv files
that dump-spv.mjs wrote, copied there if they were captured elsewhere).

usage: python3 vkstats.py [options] FILE.spv ...
  --device N|TEXT   pick physical device N (index) or the first whose name contains TEXT
                    (default: first discrete GPU, else integrated, else the first one)
  --no-robust       leave robustBufferAccess / VK_EXT_robustness2 off (Dawn turns them on; without
                    them the driver omits its bounds checks, so compare both to see their cost)
  --ir DIR          also capture the driver's internal representations into DIR (if it has any)
  --json FILE       also write all results as JSON
  --entry NAME      entry point (default: the one in the module's OpEntryPoint)

Exit status: 0 ok; 1 an error (VkResult names are printed); 3 the driver lacks the extension (pipelines
were still created, which checks the SPIR-V, but no statistics were read; Mesa 25.0 lavapipe is such a one).

The device is created as Dawn creates its own, as far as the compiled code can tell: every supported
feature of VkPhysicalDeviceFeatures and Vulkan 1.1/1.2/1.3 except protectedMemory, update-after-bind
descriptors and capture/replay addresses (so robustBufferAccess, vulkanMemoryModel,
shaderZeroInitializeWorkgroupMemory, ...), VK_EXT_robustness2 and VK_EXT_pipeline_robustness
features, VK_KHR_shader_maximal_reconvergence; the compute stage gets
ALLOW_VARYING_SUBGROUP_SIZE when subgroupSizeControl is supported (as Dawn does); no pipeline cache.
Descriptor set layouts are derived from the SPIR-V (DescriptorSet/Binding decorations and the storage
class of each variable: Uniform -> UNIFORM_BUFFER, StorageBuffer -> STORAGE_BUFFER).
"""
import ctypes as C
import json
import os
import struct
import sys
import time

# ------------------------------------------------------------------------------------------ basics
VK_RESULTS = {
    0: "VK_SUCCESS", 1: "VK_NOT_READY", 2: "VK_TIMEOUT", 3: "VK_EVENT_SET", 4: "VK_EVENT_RESET",
    5: "VK_INCOMPLETE", -1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED", -4: "VK_ERROR_DEVICE_LOST", -5: "VK_ERROR_MEMORY_MAP_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT", -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -8: "VK_ERROR_FEATURE_NOT_PRESENT", -9: "VK_ERROR_INCOMPATIBLE_DRIVER", -10: "VK_ERROR_TOO_MANY_OBJECTS",
    -11: "VK_ERROR_FORMAT_NOT_SUPPORTED", -12: "VK_ERROR_FRAGMENTED_POOL", -13: "VK_ERROR_UNKNOWN",
    -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY", -1000072003: "VK_ERROR_INVALID_EXTERNAL_HANDLE",
    -1000161000: "VK_ERROR_FRAGMENTATION", -1000257000: "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS",
    1000297000: "VK_PIPELINE_COMPILE_REQUIRED", -1000012000: "VK_ERROR_INVALID_SHADER_NV",
    -1000011001: "VK_ERROR_VALIDATION_FAILED_EXT",
}


class VkError(RuntimeError):
    pass


def check(res, what):
    if res < 0:
        raise VkError("%s failed: %s (%d)" % (what, VK_RESULTS.get(res, "VkResult"), res))
    return res


def make_version(major, minor, patch=0):
    return (major << 22) | (minor << 12) | patch


def version_str(v):
    return "%d.%d.%d" % ((v >> 22) & 0x7F, (v >> 12) & 0x3FF, v & 0xFFF)


def driver_version_str(vendor_id, v):
    if vendor_id == 0x10DE:  # NVIDIA: 10.8.8.6
        return "%d.%d.%d.%d" % ((v >> 22) & 0x3FF, (v >> 14) & 0xFF, (v >> 6) & 0xFF, v & 0x3F)
    return version_str(v)


u32 = C.c_uint32
i32 = C.c_int32
u64 = C.c_uint64
ptr = C.c_void_p
Bool32 = C.c_uint32
Handle = C.c_uint64  # non-dispatchable handles (64-bit platforms)

# sTypes
ST_APPLICATION_INFO = 0
ST_INSTANCE_CREATE_INFO = 1
ST_DEVICE_QUEUE_CREATE_INFO = 2
ST_DEVICE_CREATE_INFO = 3
ST_SHADER_MODULE_CREATE_INFO = 16
ST_PIPELINE_SHADER_STAGE_CREATE_INFO = 18
ST_COMPUTE_PIPELINE_CREATE_INFO = 29
ST_PIPELINE_LAYOUT_CREATE_INFO = 30
ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO = 32
ST_VULKAN_1_1_FEATURES = 49
ST_VULKAN_1_2_FEATURES = 51
ST_VULKAN_1_3_FEATURES = 53
ST_FEATURES_2 = 1000059000
ST_PROPERTIES_2 = 1000059001
ST_DRIVER_PROPERTIES = 1000196000
ST_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES = 1000269000
ST_PIPELINE_INFO = 1000269001
ST_PIPELINE_EXECUTABLE_PROPERTIES = 1000269002
ST_PIPELINE_EXECUTABLE_INFO = 1000269003
ST_PIPELINE_EXECUTABLE_STATISTIC = 1000269004
ST_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION = 1000269005
ST_ROBUSTNESS_2_FEATURES = 1000286000
ST_PIPELINE_ROBUSTNESS_FEATURES = 1000068001
ST_MAXIMAL_RECONVERGENCE_FEATURES = 1000434000
ST_SUBGROUP_UNIFORM_CONTROL_FLOW_FEATURES = 1000323000

VK_SHADER_STAGE_COMPUTE_BIT = 0x20
VK_QUEUE_COMPUTE_BIT = 0x2
VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR = 0x40
VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR = 0x80
VK_PIPELINE_SHADER_STAGE_CREATE_ALLOW_VARYING_SUBGROUP_SIZE_BIT = 0x1
DESC_SAMPLER, DESC_COMBINED, DESC_SAMPLED_IMAGE, DESC_STORAGE_IMAGE = 0, 1, 2, 3
DESC_UNIFORM_TEXEL, DESC_STORAGE_TEXEL, DESC_UNIFORM_BUFFER, DESC_STORAGE_BUFFER = 4, 5, 6, 7
DESC_NAMES = {0: "SAMPLER", 1: "COMBINED_IMAGE_SAMPLER", 2: "SAMPLED_IMAGE", 3: "STORAGE_IMAGE",
              4: "UNIFORM_TEXEL_BUFFER", 5: "STORAGE_TEXEL_BUFFER", 6: "UNIFORM_BUFFER", 7: "STORAGE_BUFFER"}
DEVICE_TYPES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}


# ------------------------------------------------------------------------------------------ structs
def mkstruct(name, fields):
    return type(name, (C.Structure,), {"_fields_": fields})


VkApplicationInfo = mkstruct("VkApplicationInfo", [
    ("sType", u32), ("pNext", ptr), ("pApplicationName", C.c_char_p), ("applicationVersion", u32),
    ("pEngineName", C.c_char_p), ("engineVersion", u32), ("apiVersion", u32)])
VkInstanceCreateInfo = mkstruct("VkInstanceCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("pApplicationInfo", C.POINTER(VkApplicationInfo)),
    ("enabledLayerCount", u32), ("ppEnabledLayerNames", C.POINTER(C.c_char_p)),
    ("enabledExtensionCount", u32), ("ppEnabledExtensionNames", C.POINTER(C.c_char_p))])
VkExtensionProperties = mkstruct("VkExtensionProperties", [("extensionName", C.c_char * 256), ("specVersion", u32)])
VkQueueFamilyProperties = mkstruct("VkQueueFamilyProperties", [
    ("queueFlags", u32), ("queueCount", u32), ("timestampValidBits", u32), ("granularity", u32 * 3)])
VkDeviceQueueCreateInfo = mkstruct("VkDeviceQueueCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("queueFamilyIndex", u32), ("queueCount", u32),
    ("pQueuePriorities", C.POINTER(C.c_float))])
VkDeviceCreateInfo = mkstruct("VkDeviceCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("queueCreateInfoCount", u32),
    ("pQueueCreateInfos", C.POINTER(VkDeviceQueueCreateInfo)), ("enabledLayerCount", u32),
    ("ppEnabledLayerNames", C.POINTER(C.c_char_p)), ("enabledExtensionCount", u32),
    ("ppEnabledExtensionNames", C.POINTER(C.c_char_p)), ("pEnabledFeatures", ptr)])
# VkPhysicalDeviceProperties is large (limits); keep it as raw bytes and read the head by hand.
VkPhysicalDeviceProperties2 = mkstruct("VkPhysicalDeviceProperties2", [
    ("sType", u32), ("pNext", ptr), ("properties", C.c_uint8 * 1024)])
VkPhysicalDeviceDriverProperties = mkstruct("VkPhysicalDeviceDriverProperties", [
    ("sType", u32), ("pNext", ptr), ("driverID", u32), ("driverName", C.c_char * 256),
    ("driverInfo", C.c_char * 256), ("conformanceVersion", C.c_uint8 * 4)])


def bool_struct(name, n):
    # A features struct: sType, pNext, n VkBool32 (plus spare room, harmless).
    return mkstruct(name, [("sType", u32), ("pNext", ptr), ("b", Bool32 * n), ("spare", Bool32 * 8)])


FEATURES_NAMES = (
    "robustBufferAccess fullDrawIndexUint32 imageCubeArray independentBlend geometryShader tessellationShader "
    "sampleRateShading dualSrcBlend logicOp multiDrawIndirect drawIndirectFirstInstance depthClamp depthBiasClamp "
    "fillModeNonSolid depthBounds wideLines largePoints alphaToOne multiViewport samplerAnisotropy "
    "textureCompressionETC2 textureCompressionASTC_LDR textureCompressionBC occlusionQueryPrecise "
    "pipelineStatisticsQuery vertexPipelineStoresAndAtomics fragmentStoresAndAtomics "
    "shaderTessellationAndGeometryPointSize shaderImageGatherExtended shaderStorageImageExtendedFormats "
    "shaderStorageImageMultisample shaderStorageImageReadWithoutFormat shaderStorageImageWriteWithoutFormat "
    "shaderUniformBufferArrayDynamicIndexing shaderSampledImageArrayDynamicIndexing "
    "shaderStorageBufferArrayDynamicIndexing shaderStorageImageArrayDynamicIndexing shaderClipDistance "
    "shaderCullDistance shaderFloat64 shaderInt64 shaderInt16 shaderResourceResidency shaderResourceMinLod "
    "sparseBinding sparseResidencyBuffer sparseResidencyImage2D sparseResidencyImage3D sparseResidency2Samples "
    "sparseResidency4Samples sparseResidency8Samples sparseResidency16Samples sparseResidencyAliased "
    "variableMultisampleRate inheritedQueries").split()
V11_NAMES = (
    "storageBuffer16BitAccess uniformAndStorageBuffer16BitAccess storagePushConstant16 storageInputOutput16 "
    "multiview multiviewGeometryShader multiviewTessellationShader variablePointersStorageBuffer variablePointers "
    "protectedMemory samplerYcbcrConversion shaderDrawParameters").split()
V12_NAMES = (
    "samplerMirrorClampToEdge drawIndirectCount storageBuffer8BitAccess uniformAndStorageBuffer8BitAccess "
    "storagePushConstant8 shaderBufferInt64Atomics shaderSharedInt64Atomics shaderFloat16 shaderInt8 "
    "descriptorIndexing shaderInputAttachmentArrayDynamicIndexing shaderUniformTexelBufferArrayDynamicIndexing "
    "shaderStorageTexelBufferArrayDynamicIndexing shaderUniformBufferArrayNonUniformIndexing "
    "shaderSampledImageArrayNonUniformIndexing shaderStorageBufferArrayNonUniformIndexing "
    "shaderStorageImageArrayNonUniformIndexing shaderInputAttachmentArrayNonUniformIndexing "
    "shaderUniformTexelBufferArrayNonUniformIndexing shaderStorageTexelBufferArrayNonUniformIndexing "
    "descriptorBindingUniformBufferUpdateAfterBind descriptorBindingSampledImageUpdateAfterBind "
    "descriptorBindingStorageImageUpdateAfterBind descriptorBindingStorageBufferUpdateAfterBind "
    "descriptorBindingUniformTexelBufferUpdateAfterBind descriptorBindingStorageTexelBufferUpdateAfterBind "
    "descriptorBindingUpdateUnusedWhilePending descriptorBindingPartiallyBound "
    "descriptorBindingVariableDescriptorCount runtimeDescriptorArray samplerFilterMinmax scalarBlockLayout "
    "imagelessFramebuffer uniformBufferStandardLayout shaderSubgroupExtendedTypes separateDepthStencilLayouts "
    "hostQueryReset timelineSemaphore bufferDeviceAddress bufferDeviceAddressCaptureReplay "
    "bufferDeviceAddressMultiDevice vulkanMemoryModel vulkanMemoryModelDeviceScope "
    "vulkanMemoryModelAvailabilityVisibilityChains shaderOutputViewportIndex shaderOutputLayer "
    "subgroupBroadcastDynamicId").split()
V13_NAMES = (
    "robustImageAccess inlineUniformBlock descriptorBindingInlineUniformBlockUpdateAfterBind "
    "pipelineCreationCacheControl privateData shaderDemoteToHelperInvocation shaderTerminateInvocation "
    "subgroupSizeControl computeFullSubgroups synchronization2 textureCompressionASTC_HDR "
    "shaderZeroInitializeWorkgroupMemory dynamicRendering shaderIntegerDotProduct maintenance4").split()
ROBUSTNESS2_NAMES = ["robustBufferAccess2", "robustImageAccess2", "nullDescriptor"]
assert len(FEATURES_NAMES) == 55 and len(V11_NAMES) == 12 and len(V12_NAMES) == 47 and len(V13_NAMES) == 15

VkPhysicalDeviceFeatures2 = bool_struct("VkPhysicalDeviceFeatures2", 55)
VkPhysicalDeviceVulkan11Features = bool_struct("VkPhysicalDeviceVulkan11Features", 12)
VkPhysicalDeviceVulkan12Features = bool_struct("VkPhysicalDeviceVulkan12Features", 47)
VkPhysicalDeviceVulkan13Features = bool_struct("VkPhysicalDeviceVulkan13Features", 15)
OneBoolFeatures = bool_struct("OneBoolFeatures", 1)
Robustness2Features = bool_struct("VkPhysicalDeviceRobustness2FeaturesEXT", 3)

VkShaderModuleCreateInfo = mkstruct("VkShaderModuleCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("codeSize", C.c_size_t), ("pCode", C.POINTER(u32))])
VkDescriptorSetLayoutBinding = mkstruct("VkDescriptorSetLayoutBinding", [
    ("binding", u32), ("descriptorType", u32), ("descriptorCount", u32), ("stageFlags", u32),
    ("pImmutableSamplers", ptr)])
VkDescriptorSetLayoutCreateInfo = mkstruct("VkDescriptorSetLayoutCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("bindingCount", u32),
    ("pBindings", C.POINTER(VkDescriptorSetLayoutBinding))])
VkPushConstantRange = mkstruct("VkPushConstantRange", [("stageFlags", u32), ("offset", u32), ("size", u32)])
VkPipelineLayoutCreateInfo = mkstruct("VkPipelineLayoutCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("setLayoutCount", u32), ("pSetLayouts", C.POINTER(Handle)),
    ("pushConstantRangeCount", u32), ("pPushConstantRanges", C.POINTER(VkPushConstantRange))])
VkPipelineShaderStageCreateInfo = mkstruct("VkPipelineShaderStageCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("stage", u32), ("module", Handle), ("pName", C.c_char_p),
    ("pSpecializationInfo", ptr)])
VkComputePipelineCreateInfo = mkstruct("VkComputePipelineCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("stage", VkPipelineShaderStageCreateInfo),
    ("layout", Handle), ("basePipelineHandle", Handle), ("basePipelineIndex", i32)])
VkPipelineInfoKHR = mkstruct("VkPipelineInfoKHR", [("sType", u32), ("pNext", ptr), ("pipeline", Handle)])
VkPipelineExecutablePropertiesKHR = mkstruct("VkPipelineExecutablePropertiesKHR", [
    ("sType", u32), ("pNext", ptr), ("stages", u32), ("name", C.c_char * 256), ("description", C.c_char * 256),
    ("subgroupSize", u32)])
VkPipelineExecutableInfoKHR = mkstruct("VkPipelineExecutableInfoKHR", [
    ("sType", u32), ("pNext", ptr), ("pipeline", Handle), ("executableIndex", u32)])


class VkPipelineExecutableStatisticValueKHR(C.Union):
    _fields_ = [("b32", Bool32), ("i64", C.c_int64), ("u64", C.c_uint64), ("f64", C.c_double)]


VkPipelineExecutableStatisticKHR = mkstruct("VkPipelineExecutableStatisticKHR", [
    ("sType", u32), ("pNext", ptr), ("name", C.c_char * 256), ("description", C.c_char * 256),
    ("format", u32), ("value", VkPipelineExecutableStatisticValueKHR)])
VkPipelineExecutableInternalRepresentationKHR = mkstruct("VkPipelineExecutableInternalRepresentationKHR", [
    ("sType", u32), ("pNext", ptr), ("name", C.c_char * 256), ("description", C.c_char * 256),
    ("isText", Bool32), ("dataSize", C.c_size_t), ("pData", ptr)])

P = C.POINTER
PFN = C.CFUNCTYPE
PROTOS = {
    # global / instance
    "vkEnumerateInstanceVersion": PFN(i32, P(u32)),
    "vkCreateInstance": PFN(i32, P(VkInstanceCreateInfo), ptr, P(ptr)),
    "vkDestroyInstance": PFN(None, ptr, ptr),
    "vkEnumeratePhysicalDevices": PFN(i32, ptr, P(u32), P(ptr)),
    "vkGetPhysicalDeviceProperties2": PFN(None, ptr, P(VkPhysicalDeviceProperties2)),
    "vkGetPhysicalDeviceFeatures2": PFN(None, ptr, P(VkPhysicalDeviceFeatures2)),
    "vkGetPhysicalDeviceQueueFamilyProperties": PFN(None, ptr, P(u32), P(VkQueueFamilyProperties)),
    "vkEnumerateDeviceExtensionProperties": PFN(i32, ptr, C.c_char_p, P(u32), P(VkExtensionProperties)),
    "vkCreateDevice": PFN(i32, ptr, P(VkDeviceCreateInfo), ptr, P(ptr)),
    "vkGetDeviceProcAddr": PFN(ptr, ptr, C.c_char_p),
    # device
    "vkDestroyDevice": PFN(None, ptr, ptr),
    "vkCreateShaderModule": PFN(i32, ptr, P(VkShaderModuleCreateInfo), ptr, P(Handle)),
    "vkDestroyShaderModule": PFN(None, ptr, Handle, ptr),
    "vkCreateDescriptorSetLayout": PFN(i32, ptr, P(VkDescriptorSetLayoutCreateInfo), ptr, P(Handle)),
    "vkDestroyDescriptorSetLayout": PFN(None, ptr, Handle, ptr),
    "vkCreatePipelineLayout": PFN(i32, ptr, P(VkPipelineLayoutCreateInfo), ptr, P(Handle)),
    "vkDestroyPipelineLayout": PFN(None, ptr, Handle, ptr),
    "vkCreateComputePipelines": PFN(i32, ptr, Handle, u32, P(VkComputePipelineCreateInfo), ptr, P(Handle)),
    "vkDestroyPipeline": PFN(None, ptr, Handle, ptr),
    "vkGetPipelineExecutablePropertiesKHR": PFN(i32, ptr, P(VkPipelineInfoKHR), P(u32),
                                                P(VkPipelineExecutablePropertiesKHR)),
    "vkGetPipelineExecutableStatisticsKHR": PFN(i32, ptr, P(VkPipelineExecutableInfoKHR), P(u32),
                                                P(VkPipelineExecutableStatisticKHR)),
    "vkGetPipelineExecutableInternalRepresentationsKHR": PFN(i32, ptr, P(VkPipelineExecutableInfoKHR), P(u32),
                                                             P(VkPipelineExecutableInternalRepresentationKHR)),
}


class Vk:
    def __init__(self):
        try:
            self.lib = C.CDLL("libvulkan.so.1")
        except OSError as e:
            raise VkError("cannot load libvulkan.so.1: %s" % e)
        gipa = self.lib.vkGetInstanceProcAddr
        gipa.restype = ptr
        gipa.argtypes = [ptr, C.c_char_p]
        self._gipa = gipa

    def instance_fn(self, instance, name):
        addr = self._gipa(instance, name.encode())
        if not addr:
            raise VkError("vkGetInstanceProcAddr(%s) returned NULL" % name)
        return PROTOS[name](addr)

    def device_fn(self, gdpa, device, name):
        addr = gdpa(device, name.encode())
        if not addr:
            raise VkError("vkGetDeviceProcAddr(%s) returned NULL (extension not enabled?)" % name)
        return PROTOS[name](addr)


# ------------------------------------------------------------------------------------------ SPIR-V
def spirv_string(words, i):
    raw = struct.pack("<%dI" % (len(words) - i), *words[i:])
    s = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return s, i + (len(s.encode()) // 4) + 1


def parse_spirv(data):
    if len(data) % 4 or len(data) < 20:
        raise VkError("not a SPIR-V binary (size %d)" % len(data))
    words = list(struct.unpack("<%dI" % (len(data) // 4), data))
    if words[0] != 0x07230203:
        raise VkError("not a SPIR-V binary (magic %#x)" % words[0])
    info = {"version": "%d.%d" % ((words[1] >> 16) & 0xFF, (words[1] >> 8) & 0xFF), "caps": [], "exts": [],
            "entries": [], "modes": {}, "decor": {}, "vars": {}, "ptrs": {}, "types": {}, "instructions": []}
    i = 5
    while i < len(words):
        wc, op = words[i] >> 16, words[i] & 0xFFFF
        if wc == 0:
            raise VkError("bad SPIR-V instruction at word %d" % i)
        ins = words[i:i + wc]
        info["instructions"].append((i, wc, op))
        if op == 17:  # OpCapability
            info["caps"].append(ins[1])
        elif op == 10:  # OpExtension
            info["exts"].append(spirv_string(ins, 1)[0])
        elif op == 15:  # OpEntryPoint model id name
            name, _ = spirv_string(ins, 3)
            info["entries"].append((ins[1], ins[2], name))
        elif op == 16:  # OpExecutionMode id mode literals
            info["modes"].setdefault(ins[1], []).append((ins[2], list(ins[3:])))
        elif op == 71:  # OpDecorate target decoration literals
            info["decor"].setdefault(ins[1], {})[ins[2]] = list(ins[3:])
        elif op == 59:  # OpVariable type id storageClass
            info["vars"][ins[2]] = (ins[1], ins[3])
        elif op == 32:  # OpTypePointer id storageClass type
            info["ptrs"][ins[1]] = (ins[2], ins[3])
        elif op in (25, 26, 27, 28, 29, 30):  # image, sampler, sampled image, array, runtime array, struct
            info["types"][ins[1]] = (op, list(ins[2:]))
        i += wc
    info["words"] = words
    return info


CAP_NAMES = {1: "Shader", 9: "Float16", 10: "Float64", 11: "Int64", 22: "Int16", 39: "Int8",
             61: "GroupNonUniform", 62: "GroupNonUniformVote", 63: "GroupNonUniformArithmetic",
             64: "GroupNonUniformBallot", 65: "GroupNonUniformShuffle", 66: "GroupNonUniformShuffleRelative",
             67: "GroupNonUniformClustered", 68: "GroupNonUniformQuad", 4423: "SubgroupBallotKHR",
             4433: "StorageBuffer16BitAccess", 4434: "UniformAndStorageBuffer16BitAccess",
             4435: "StoragePushConstant16", 4436: "StorageInputOutput16", 4448: "StorageBuffer8BitAccess",
             5345: "VulkanMemoryModel", 5346: "VulkanMemoryModelDeviceScope", 6016: "DotProductInputAll",
             6017: "DotProductInput4x8Bit", 6018: "DotProductInput4x8BitPacked", 6019: "DotProduct",
             6022: "CooperativeMatrixKHR"}


def bindings_of(info):
    """[(set, binding, descriptorType)] for the variables with DescriptorSet/Binding decorations."""
    out = []
    push_constant = False
    for var, (ptype, sc) in info["vars"].items():
        if sc == 9:
            push_constant = True
        d = info["decor"].get(var, {})
        if 34 not in d and 33 not in d:  # DescriptorSet, Binding
            continue
        dset, binding = d.get(34, [0])[0], d.get(33, [0])[0]
        pointee = info["ptrs"].get(ptype, (sc, 0))[1]
        # Unwrap arrays of resources.
        count = 1
        t = info["types"].get(pointee)
        while t and t[0] in (28, 29):
            pointee = t[1][0]
            t = info["types"].get(pointee)
        if sc == 12:  # StorageBuffer
            dt = DESC_STORAGE_BUFFER
        elif sc == 2:  # Uniform (or StorageBuffer-as-Uniform+BufferBlock in SPIR-V < 1.3)
            dt = DESC_STORAGE_BUFFER if 3 in info["decor"].get(pointee, {}) else DESC_UNIFORM_BUFFER
        elif sc == 0:  # UniformConstant: images, samplers
            if t and t[0] == 26:
                dt = DESC_SAMPLER
            elif t and t[0] == 27:
                dt = DESC_COMBINED
            elif t and t[0] == 25:
                dim, sampled = t[1][1], t[1][5]
                if dim == 5:  # Buffer
                    dt = DESC_STORAGE_TEXEL if sampled == 2 else DESC_UNIFORM_TEXEL
                else:
                    dt = DESC_STORAGE_IMAGE if sampled == 2 else DESC_SAMPLED_IMAGE
            else:
                raise VkError("cannot tell the descriptor type of variable %%%d" % var)
        else:
            raise VkError("variable %%%d with a binding has storage class %d" % (var, sc))
        out.append((dset, binding, dt, count))
    return sorted(out), push_constant


def strip_instructions(info, drop):
    """The module's words without the instructions for which drop(op, words) is true."""
    words = info["words"]
    out = words[:5]
    for (i, wc, op) in info["instructions"]:
        ins = words[i:i + wc]
        if not drop(op, ins):
            out.extend(ins)
    return out


# ------------------------------------------------------------------------------------------ device
def cstr(b):
    return bytes(b).split(b"\0", 1)[0].decode("utf-8", "replace")


def chain(*structs):
    for a, b in zip(structs, structs[1:]):
        a.pNext = C.cast(C.pointer(b), ptr)
    structs[-1].pNext = None
    return structs[0]


class Context:
    WANTED_EXTS = [
        "VK_KHR_pipeline_executable_properties",
        "VK_EXT_robustness2", "VK_KHR_robustness2", "VK_EXT_pipeline_robustness",
        "VK_KHR_shader_maximal_reconvergence", "VK_KHR_shader_subgroup_uniform_control_flow",
        "VK_KHR_vulkan_memory_model", "VK_KHR_spirv_1_4", "VK_KHR_shader_float_controls",
        "VK_EXT_subgroup_size_control", "VK_KHR_zero_initialize_workgroup_memory",
        "VK_KHR_shader_float16_int8", "VK_KHR_16bit_storage", "VK_KHR_8bit_storage",
        "VK_KHR_shader_integer_dot_product", "VK_KHR_shader_subgroup_extended_types",
        "VK_EXT_shader_demote_to_helper_invocation", "VK_KHR_storage_buffer_storage_class",
    ]

    def __init__(self, device_sel=None, robust=True):
        self.vk = Vk()
        self.instance = None
        self.device = None
        vk = self.vk
        loader_version = make_version(1, 0)
        try:
            ev = vk.instance_fn(None, "vkEnumerateInstanceVersion")
            v = u32()
            check(ev(C.byref(v)), "vkEnumerateInstanceVersion")
            loader_version = v.value
        except VkError:
            pass
        api = min(loader_version, make_version(1, 3))
        if api < make_version(1, 1):
            raise VkError("the Vulkan loader is %s; need 1.1 or later" % version_str(loader_version))
        app = VkApplicationInfo(ST_APPLICATION_INFO, None, b"vkstats", 1, b"vkstats", 1, api)
        ici = VkInstanceCreateInfo(ST_INSTANCE_CREATE_INFO, None, 0, C.pointer(app), 0, None, 0, None)
        inst = ptr()
        check(vk.instance_fn(None, "vkCreateInstance")(C.byref(ici), None, C.byref(inst)), "vkCreateInstance")
        self.instance = inst
        fn = lambda name: vk.instance_fn(inst, name)  # noqa: E731
        self.destroy_instance = fn("vkDestroyInstance")

        n = u32()
        epd = fn("vkEnumeratePhysicalDevices")
        check(epd(inst, C.byref(n), None), "vkEnumeratePhysicalDevices")
        if n.value == 0:
            raise VkError("no Vulkan physical devices (is a driver installed / VK_ICD_FILENAMES set?)")
        pds = (ptr * n.value)()
        check(epd(inst, C.byref(n), pds), "vkEnumeratePhysicalDevices")
        gpp2 = fn("vkGetPhysicalDeviceProperties2")
        devs = []
        for idx, pd in enumerate(pds):
            drv = VkPhysicalDeviceDriverProperties(ST_DRIVER_PROPERTIES, None)
            props = VkPhysicalDeviceProperties2(ST_PROPERTIES_2, C.cast(C.pointer(drv), ptr))
            gpp2(pd, C.byref(props))
            raw = bytes(props.properties)
            api_v, drv_v, vendor, devid, dtype = struct.unpack_from("<5I", raw, 0)
            name = cstr(raw[20:276])
            devs.append(dict(index=idx, pd=pd, api=api_v, driver=drv_v, vendor=vendor, deviceID=devid, type=dtype,
                             name=name, driverName=cstr(drv.driverName), driverInfo=cstr(drv.driverInfo)))
        for d in devs:
            print("  device %d: %s (%s, Vulkan %s, vendor %#06x)" % (
                d["index"], d["name"], DEVICE_TYPES.get(d["type"], d["type"]), version_str(d["api"]), d["vendor"]))
        chosen = None
        if device_sel is not None:
            if device_sel.isdigit():
                chosen = devs[int(device_sel)]
            else:
                chosen = next((d for d in devs if device_sel.lower() in d["name"].lower()), None)
                if chosen is None:
                    raise VkError("no device whose name contains %r" % device_sel)
        else:
            for t in (2, 1):
                chosen = chosen or next((d for d in devs if d["type"] == t), None)
            chosen = chosen or devs[0]
        self.info = chosen
        pd = chosen["pd"]
        print("Using device %d: %s; driver %s %s (version %s); device Vulkan %s" % (
            chosen["index"], chosen["name"], chosen["driverName"], chosen["driverInfo"],
            driver_version_str(chosen["vendor"], chosen["driver"]), version_str(chosen["api"])))
        dev_api = min(chosen["api"], api)

        # Extensions.
        edp = fn("vkEnumerateDeviceExtensionProperties")
        check(edp(pd, None, C.byref(n), None), "vkEnumerateDeviceExtensionProperties")
        exts = (VkExtensionProperties * n.value)()
        check(edp(pd, None, C.byref(n), exts), "vkEnumerateDeviceExtensionProperties")
        available = {cstr(e.extensionName) for e in exts}
        self.have_stats = "VK_KHR_pipeline_executable_properties" in available
        if not self.have_stats:
            print("  WARNING: the device does not expose VK_KHR_pipeline_executable_properties: pipelines are"
                  " still created (so the SPIR-V, layouts and features are checked) but no statistics are read")
        enabled = [e for e in self.WANTED_EXTS if e in available]
        if "VK_KHR_robustness2" in enabled and "VK_EXT_robustness2" in enabled:
            enabled.remove("VK_KHR_robustness2")
        self.extensions = enabled

        # Features: query everything we know of, enable all that is supported.
        f2 = VkPhysicalDeviceFeatures2(ST_FEATURES_2)
        structs = [f2]
        f11 = VkPhysicalDeviceVulkan11Features(ST_VULKAN_1_1_FEATURES)
        f12 = VkPhysicalDeviceVulkan12Features(ST_VULKAN_1_2_FEATURES)
        f13 = VkPhysicalDeviceVulkan13Features(ST_VULKAN_1_3_FEATURES)
        if dev_api >= make_version(1, 2):
            structs += [f11, f12]
        if dev_api >= make_version(1, 3):
            structs += [f13]
        pexe = OneBoolFeatures(ST_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES)
        if self.have_stats:
            structs.append(pexe)
        rob2 = Robustness2Features(ST_ROBUSTNESS_2_FEATURES)
        if "VK_EXT_robustness2" in enabled or "VK_KHR_robustness2" in enabled:
            structs.append(rob2)
        prob = OneBoolFeatures(ST_PIPELINE_ROBUSTNESS_FEATURES)
        if "VK_EXT_pipeline_robustness" in enabled:
            structs.append(prob)
        mrec = OneBoolFeatures(ST_MAXIMAL_RECONVERGENCE_FEATURES)
        if "VK_KHR_shader_maximal_reconvergence" in enabled:
            structs.append(mrec)
        sucf = OneBoolFeatures(ST_SUBGROUP_UNIFORM_CONTROL_FLOW_FEATURES)
        if "VK_KHR_shader_subgroup_uniform_control_flow" in enabled:
            structs.append(sucf)
        chain(*structs)
        fn("vkGetPhysicalDeviceFeatures2")(pd, C.byref(f2))
        if self.have_stats and not pexe.b[0]:
            print("  WARNING: pipelineExecutableInfo is not supported by the device: no statistics")
            self.have_stats = False
            structs.remove(pexe)
            chain(*structs)
        self.maximal_reconvergence = bool(mrec.b[0]) and mrec in structs
        self.subgroup_size_control = dev_api >= make_version(1, 3) and bool(f13.b[7])
        if not robust:
            f2.b[0] = 0
            rob2.b[0] = rob2.b[1] = 0
            f13.b[0] = 0  # robustImageAccess
        self.robust = {"robustBufferAccess": bool(f2.b[0]),
                       "robustBufferAccess2": bool(rob2.b[0]) and rob2 in structs}
        # Dawn's device never has these; some drivers reject protectedMemory without a protected queue.
        f11.b[V11_NAMES.index("protectedMemory")] = 0
        # Nor these (update-after-bind descriptors may not be combined with robustBufferAccess on drivers
        # without robustBufferAccessUpdateAfterBind; capture/replay and multi-device addresses are for tools).
        for nm in V12_NAMES:
            if nm.endswith("UpdateAfterBind") or nm in ("bufferDeviceAddressCaptureReplay",
                                                         "bufferDeviceAddressMultiDevice"):
                f12.b[V12_NAMES.index(nm)] = 0
        f13.b[V13_NAMES.index("descriptorBindingInlineUniformBlockUpdateAfterBind")] = 0
        important = []
        for nm in ("vulkanMemoryModel", "vulkanMemoryModelDeviceScope", "shaderFloat16", "shaderInt8"):
            important.append("%s=%d" % (nm, f12.b[V12_NAMES.index(nm)]))
        for nm in ("subgroupSizeControl", "shaderZeroInitializeWorkgroupMemory", "shaderIntegerDotProduct"):
            important.append("%s=%d" % (nm, f13.b[V13_NAMES.index(nm)]))
        important.append("robustBufferAccess=%d" % f2.b[0])
        important.append("robustBufferAccess2=%d" % (rob2.b[0] if rob2 in structs else 0))
        important.append("maximalReconvergence=%d" % self.maximal_reconvergence)
        print("  extensions: %s" % " ".join(enabled))
        print("  features (all supported enabled; some): %s" % " ".join(important))
        self._keep = structs

        # Queue.
        qfp = fn("vkGetPhysicalDeviceQueueFamilyProperties")
        qfp(pd, C.byref(n), None)
        fams = (VkQueueFamilyProperties * n.value)()
        qfp(pd, C.byref(n), fams)
        qfi = next((i for i, f in enumerate(fams) if f.queueFlags & VK_QUEUE_COMPUTE_BIT), 0)
        prio = C.c_float(1.0)
        qci = VkDeviceQueueCreateInfo(ST_DEVICE_QUEUE_CREATE_INFO, None, 0, qfi, 1, C.pointer(prio))
        ext_arr = (C.c_char_p * len(enabled))(*[e.encode() for e in enabled])
        dci = VkDeviceCreateInfo(ST_DEVICE_CREATE_INFO, C.cast(C.pointer(f2), ptr), 0, 1, C.pointer(qci),
                                 0, None, len(enabled), ext_arr, None)
        dev = ptr()
        check(fn("vkCreateDevice")(pd, C.byref(dci), None, C.byref(dev)), "vkCreateDevice")
        self.device = dev
        gdpa = fn("vkGetDeviceProcAddr")
        self.d = {}
        for name in PROTOS:
            if name.startswith(("vkDestroyDevice", "vkCreateShader", "vkDestroyShader", "vkCreateDescriptor",
                                "vkDestroyDescriptor", "vkCreatePipeline", "vkDestroyPipeline",
                                "vkCreateCompute", "vkGetPipelineExecutable")):
                if name.startswith("vkGetPipelineExecutable") and not self.have_stats:
                    continue
                self.d[name] = vk.device_fn(gdpa, dev, name)

    def close(self):
        if self.device:
            self.d["vkDestroyDevice"](self.device, None)
            self.device = None
        if self.instance:
            self.destroy_instance(self.instance, None)
            self.instance = None

    # -------------------------------------------------------------------------------------- one module
    def stats(self, path, entry=None, ir_dir=None):
        d = self.d
        dev = self.device
        data = open(path, "rb").read()
        info = parse_spirv(data)
        words = info["words"]
        notes = []
        if not info["entries"]:
            raise VkError("%s: no OpEntryPoint" % path)
        ep = next((e for e in info["entries"] if entry is None or e[2] == entry), None)
        if ep is None:
            raise VkError("%s: no entry point %r (have %s)" % (path, entry, [e[2] for e in info["entries"]]))
        model, ep_id, ep_name = ep
        local = next((lits for (m, lits) in info["modes"].get(ep_id, []) if m == 17), None)
        if 6023 in [m for (m, _) in info["modes"].get(ep_id, [])] and not self.maximal_reconvergence:
            words = strip_instructions(info, lambda op, ins: (op == 16 and ins[2] == 6023) or (
                op == 10 and spirv_string(ins, 1)[0] == "SPV_KHR_maximal_reconvergence"))
            notes.append("device lacks shaderMaximalReconvergence: MaximallyReconvergesKHR stripped")
        sets, push_constant = bindings_of(info)
        caps = [CAP_NAMES.get(c, str(c)) for c in info["caps"]]
        print("\n=== %s" % path)
        print("  SPIR-V %s, entry \"%s\" (model %d), LocalSize %s, caps [%s], exts [%s]" % (
            info["version"], ep_name, model, "x".join(map(str, local)) if local else "?", " ".join(caps),
            " ".join(info["exts"])))
        print("  bindings: %s%s" % (", ".join("%d/%d %s" % (s, b, DESC_NAMES[t]) for (s, b, t, _) in sets) or "none",
                                    "; push constants (128 bytes assumed)" if push_constant else ""))
        for nt in notes:
            print("  note: " + nt)

        handles = {"module": Handle(), "layouts": [], "playout": Handle(), "pipeline": Handle()}
        result = {"file": path, "entry": ep_name, "localSize": local, "device": self.info["name"],
                  "driver": "%s %s" % (self.info["driverName"], self.info["driverInfo"]),
                  "robust": self.robust, "executables": []}
        try:
            code = (u32 * len(words))(*words)
            smci = VkShaderModuleCreateInfo(ST_SHADER_MODULE_CREATE_INFO, None, 0, 4 * len(words), code)
            check(d["vkCreateShaderModule"](dev, C.byref(smci), None, C.byref(handles["module"])),
                  "vkCreateShaderModule")
            nsets = (max(s for (s, _, _, _) in sets) + 1) if sets else 0
            for s in range(nsets):
                bs = [(b, t, cnt) for (ss, b, t, cnt) in sets if ss == s]
                arr = (VkDescriptorSetLayoutBinding * max(1, len(bs)))()
                for k, (b, t, cnt) in enumerate(bs):
                    arr[k] = VkDescriptorSetLayoutBinding(b, t, cnt, VK_SHADER_STAGE_COMPUTE_BIT, None)
                dslci = VkDescriptorSetLayoutCreateInfo(ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, None, 0, len(bs), arr)
                h = Handle()
                check(d["vkCreateDescriptorSetLayout"](dev, C.byref(dslci), None, C.byref(h)),
                      "vkCreateDescriptorSetLayout")
                handles["layouts"].append(h)
            set_arr = (Handle * max(1, nsets))(*[h.value for h in handles["layouts"]])
            pcr = VkPushConstantRange(VK_SHADER_STAGE_COMPUTE_BIT, 0, 128)
            plci = VkPipelineLayoutCreateInfo(ST_PIPELINE_LAYOUT_CREATE_INFO, None, 0, nsets, set_arr,
                                              1 if push_constant else 0, C.pointer(pcr) if push_constant else None)
            check(d["vkCreatePipelineLayout"](dev, C.byref(plci), None, C.byref(handles["playout"])),
                  "vkCreatePipelineLayout")
            stage = VkPipelineShaderStageCreateInfo(
                ST_PIPELINE_SHADER_STAGE_CREATE_INFO, None,
                VK_PIPELINE_SHADER_STAGE_CREATE_ALLOW_VARYING_SUBGROUP_SIZE_BIT if self.subgroup_size_control else 0,
                VK_SHADER_STAGE_COMPUTE_BIT, handles["module"].value, ep_name.encode(), None)
            flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR if self.have_stats else 0
            if ir_dir and self.have_stats:
                flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR
            cpci = VkComputePipelineCreateInfo(ST_COMPUTE_PIPELINE_CREATE_INFO, None, flags, stage,
                                               handles["playout"].value, 0, -1)
            t0 = time.time()
            check(d["vkCreateComputePipelines"](dev, 0, 1, C.byref(cpci), None, C.byref(handles["pipeline"])),
                  "vkCreateComputePipelines")
            secs = time.time() - t0
            result["compileSeconds"] = round(secs, 3)
            print("  vkCreateComputePipelines: %.2f s" % secs)
            if not self.have_stats:
                print("  (no statistics: VK_KHR_pipeline_executable_properties unavailable)")
                return result

            pinfo = VkPipelineInfoKHR(ST_PIPELINE_INFO, None, handles["pipeline"].value)
            props, n = self._query("vkGetPipelineExecutablePropertiesKHR", pinfo,
                                   VkPipelineExecutablePropertiesKHR, ST_PIPELINE_EXECUTABLE_PROPERTIES)
            for idx in range(n.value):
                p = props[idx]
                ex = {"index": idx, "name": cstr(p.name), "description": cstr(p.description),
                      "stages": p.stages, "subgroupSize": p.subgroupSize, "statistics": []}
                print("  executable %d: %s (%s), stages %#x, subgroupSize %d" % (
                    idx, ex["name"], ex["description"], p.stages, p.subgroupSize))
                einfo = VkPipelineExecutableInfoKHR(ST_PIPELINE_EXECUTABLE_INFO, None, handles["pipeline"].value, idx)
                st, m = self._query("vkGetPipelineExecutableStatisticsKHR", einfo,
                                    VkPipelineExecutableStatisticKHR, ST_PIPELINE_EXECUTABLE_STATISTIC)
                width = max([len(cstr(s.name)) for s in st] + [10])
                for s in st[:m.value]:
                    fmt = s.format
                    if fmt == 0:
                        val = bool(s.value.b32)
                    elif fmt == 1:
                        val = s.value.i64
                    elif fmt == 2:
                        val = s.value.u64
                    elif fmt == 3:
                        val = s.value.f64
                    else:
                        val = "?(format %d)" % fmt
                    ex["statistics"].append({"name": cstr(s.name), "value": val, "description": cstr(s.description)})
                    print("    %-*s %14s   %s" % (width, cstr(s.name), val, cstr(s.description)))
                if ir_dir:
                    self._internal(einfo, ir_dir, path, idx, ex)
                result["executables"].append(ex)
        finally:
            if handles["pipeline"].value:
                d["vkDestroyPipeline"](dev, handles["pipeline"], None)
            if handles["playout"].value:
                d["vkDestroyPipelineLayout"](dev, handles["playout"], None)
            for h in handles["layouts"]:
                d["vkDestroyDescriptorSetLayout"](dev, h, None)
            if handles["module"].value:
                d["vkDestroyShaderModule"](dev, handles["module"], None)
        return result

    def _query(self, name, info, struct, s_type):
        """Vulkan's two-call query of device function `name`: the count, then that many structs (sType set)
        filled in. Returns the array and the count (a u32, as a third call wants it)."""
        fn = self.d[name]
        n = u32()
        check(fn(self.device, C.byref(info), C.byref(n), None), name)
        out = (struct * n.value)()
        for o in out:
            o.sType = s_type
        check(fn(self.device, C.byref(info), C.byref(n), out), name)
        return out, n

    def _internal(self, einfo, ir_dir, path, idx, ex):
        gir = self.d["vkGetPipelineExecutableInternalRepresentationsKHR"]
        dev = self.device
        reps, m = self._query("vkGetPipelineExecutableInternalRepresentationsKHR", einfo,
                              VkPipelineExecutableInternalRepresentationKHR,
                              ST_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION)
        bufs = []
        for r in reps[:m.value]:
            b = C.create_string_buffer(r.dataSize + 1)
            bufs.append(b)
            r.pData = C.cast(b, ptr)
        check(gir(dev, C.byref(einfo), C.byref(m), reps), "vkGetPipelineExecutableInternalRepresentationsKHR")
        os.makedirs(ir_dir, exist_ok=True)
        base = os.path.splitext(os.path.basename(path))[0]
        ex["internalRepresentations"] = []
        for k, (r, b) in enumerate(zip(reps[:m.value], bufs)):
            data = b.raw[:r.dataSize]
            if r.isText:
                data = data.split(b"\0", 1)[0]
            safe = "".join(ch if ch.isalnum() else "_" for ch in cstr(r.name))[:40]
            out = os.path.join(ir_dir, "%s.exe%d.ir%d.%s.%s" % (base, idx, k, safe, "txt" if r.isText else "bin"))
            with open(out, "wb") as f:
                f.write(data)
            ex["internalRepresentations"].append({"name": cstr(r.name), "description": cstr(r.description),
                                                  "file": out, "bytes": len(data)})
            print("    IR %d: %s (%s): %d bytes -> %s" % (k, cstr(r.name), cstr(r.description), len(data), out))


def main(argv):
    sys.stdout.reconfigure(line_buffering=True)
    args = list(argv)
    opts = {"device": None, "robust": True, "ir": None, "json": None, "entry": None}
    files = []
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a == "--device":
            opts["device"] = args.pop(0)
        elif a == "--no-robust":
            opts["robust"] = False
        elif a == "--ir":
            opts["ir"] = args.pop(0)
        elif a == "--json":
            opts["json"] = args.pop(0)
        elif a == "--entry":
            opts["entry"] = args.pop(0)
        elif a.startswith("--"):
            print("unknown option %s" % a, file=sys.stderr)
            return 2
        else:
            files.append(a)
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    results = []
    failures = 0
    ctx = None
    try:
        ctx = Context(opts["device"], opts["robust"])
        for f in files:
            try:
                results.append(ctx.stats(f, opts["entry"], opts["ir"]))
            except (VkError, OSError) as e:
                failures += 1
                print("ERROR: %s: %s" % (f, e), file=sys.stderr)
                sys.stdout.flush()
    except VkError as e:
        print("ERROR: %s" % e, file=sys.stderr)
        return 1
    finally:
        if ctx:
            ctx.close()
    if ctx is not None and not ctx.have_stats:
        print("\nNOTE: no statistics were read (the driver lacks VK_KHR_pipeline_executable_properties); exit 3")
        failures = failures or -1
    if opts["json"]:
        with open(opts["json"], "w") as fh:
            json.dump(results, fh, indent=2)
        print("\nwrote %s" % opts["json"])
    return 3 if failures == -1 else (1 if failures else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
