import Hummingbird
import CosyncAuth
